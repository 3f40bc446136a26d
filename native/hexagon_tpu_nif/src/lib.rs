//! The NIF side of `hexagon_tpu`: resources, term encoding and dirty-scheduled entry points.
//!
//! All QNN work lives in the `qnn` crate; this crate only moves terms in and out of it.
//! Loading the NIF does nothing that can fail (a failing `on_load` takes a Nerves VM down at
//! boot): libraries are opened by `runtime_create`, on a dirty IO scheduler.
//!
//! Scheduling: what blocks runs on dirty IO schedulers (runtime creation, context loading and
//! inspection, graph retrieval, a performance vote, the profile setting, the log's flush: they
//! wait on `dlopen`, file reads, QnnSystem's parse or the backend); what computes runs on dirty
//! CPU schedulers (`graph_execute`, which quantizes, votes the call's performance mode when it
//! is not in force, executes and dequantizes; `preprocess_image`, a camera frame to a model
//! input's bytes; the trace's export; SSD anchors). The `postprocess_*` decoders (top k, NMS,
//! YOLO heads, SSD, masks) come in two copies (`postprocess.rs`'s `normal_and_dirty!`): a
//! normal one for small inputs and a `*_dirty` one on a dirty CPU scheduler. Every `close` is a
//! plain NIF: it only hands the free on (to the runtime's thread, or to whichever execute
//! finishes last) and the answer comes by message.
//!
//! Unsafe code is forbidden here: all of it lives in `qnn`.

#![forbid(unsafe_code)]

mod atoms;
mod context;
mod error;
mod graph;
mod log;
mod perf;
mod postprocess;
mod preprocess;
mod profile;
mod protocol;
mod quote;
mod reply;
mod resources;
mod runtime;
#[cfg(feature = "test-support")]
mod sim_probe;
mod stats;
mod terms;
mod trace;

/// Nothing here may fail: no QNN library is touched until `runtime_create`.
fn load(_env: rustler::Env, _info: rustler::Term) -> bool {
    true
}

rustler::init!("Elixir.HexagonTpu.Native", load = load);
