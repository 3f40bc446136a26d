//! The QNN runtime in safe Rust: the hand-written ABI ([`sys`]), library loading and provider
//! negotiation, the object model (`Runtime` → `Context` → `Graph`), validated tensor metadata,
//! host-side quantization kernels, process-wide counters and the ledger of live objects. Test
//! builds add `sim_probe` (cargo feature `test-support`), which reads qnn_sim's own counters.
//!
//! All `unsafe` code of the package lives in this crate (and one block of `qnn_sys`'s layout
//! assertions); each block states why it is sound.
//! Threading: a `Graph` runs one `graphExecute` at a time, and a caller never waits for another's
//! (a busy graph queues the work for its own thread); different graphs run in parallel. QNN's
//! log, backend, device and context handles are created and freed on one thread per runtime.

// Layers, lowest first. A module imports only from its own layer and the layers before it in
// this list (.ci/architecture.sh checks it): base → observe → ffi → model → exec → tools.
// The old flat paths (`qnn::graph`, `qnn::counters`, …) stay as re-exports below.
pub(crate) mod base;
pub(crate) mod exec;
pub(crate) mod ffi;
pub(crate) mod model;
pub(crate) mod observe;
pub(crate) mod tools;

pub use qnn_sys as sys;

#[cfg(feature = "test-support")]
pub use base::counting_alloc;
pub use base::{error, version};
pub use exec::{context, graph, io, perf, profile, runtime, shared};
pub use ffi::log;
pub use model::{metadata, model_file, preflight, quant, tensor};
pub use observe::{counters, ledger, trace};
#[cfg(feature = "test-support")]
pub use tools::sim_probe;
pub use tools::{inspect, postprocess, preprocess};

pub use base::exit::exiting;
pub use context::{Context, ExecuteQueue};
pub use counters::{Counters, counters};
pub use error::{Error, LibraryRole, Result};
pub use ffi::loader::{MIN_CORE_API, MIN_SYSTEM_API};
pub use graph::{ExecuteReport, Graph, QueuePolicy, Started, Turn};
pub use ledger::{Held, LiveEntry, Part, Site};
pub use log::{LogLevel, LogRecord};
pub use metadata::{BinaryInfo, GraphInfo};
pub use perf::{PerfMode, PerfState, Vote};
pub use runtime::{PerfConfig, Runtime, RuntimeConfig, RuntimeInfo};
pub use shared::{BufferChoice, BufferPath, SharedBuffer};
pub use tensor::{DataType, Quantization, TensorInfo};
pub use version::Version;
