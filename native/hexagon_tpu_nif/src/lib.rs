//! The NIF side of `hexagon_tpu`: resources, term encoding and dirty-scheduled entry points.
//!
//! All QNN work lives in the `qnn` crate; this crate only moves terms in and out of it.
//! Loading the NIF does nothing that can fail (a failing `on_load` takes a Nerves VM down at
//! boot): libraries are opened by `runtime_create`, on a dirty IO scheduler.
//!
//! Scheduling: runtime creation, context loading and graph retrieval run on dirty IO schedulers
//! (they block on `dlopen`, file reads and QnnSystem's parse); `graph_execute` runs on a dirty
//! CPU scheduler (it quantizes, votes the call's performance mode when it is not in force,
//! executes and dequantizes), and so does `preprocess_image` (a camera
//! frame to a model input's bytes); the `postprocess_*` NIFs (top k, NMS, YOLO heads) come in
//! two copies, a normal one for small inputs and a `*_dirty` one on a dirty CPU scheduler. Every `close` is a plain NIF: it only
//! hands the free on (to the runtime's thread, or to whichever execute finishes last) and the
//! answer comes by message.
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
