//! The QNN runtime in safe Rust: the hand-written ABI ([`sys`]), library loading and provider
//! negotiation, the object model (`Runtime` → `Context` → `Graph`), validated tensor metadata,
//! host-side quantization kernels, process-wide counters and the ledger of live objects. Test
//! builds add `sim_probe` (cargo feature `test-support`), which reads qnn_sim's own counters.
//!
//! All `unsafe` code of the package lives in this crate; each block states why it is sound.
//! Threading: a `Graph` runs one `graphExecute` at a time, and a caller never waits for another's
//! (a busy graph queues the work for its own thread); different graphs run in parallel. QNN's
//! log, backend, device and context handles are created and freed on one thread per runtime.

mod closable;
pub mod context;
pub mod counters;
pub mod error;
mod exit;
pub mod graph;
pub mod inspect;
pub mod io;
pub mod ledger;
mod loader;
pub mod log;
pub mod metadata;
pub mod model_file;
mod owner;
pub mod perf;
mod platform;
pub mod preflight;
pub mod preprocess;
pub mod profile;
pub mod quant;
pub mod runtime;
#[cfg(feature = "test-support")]
pub mod sim_probe;
pub use qnn_sys as sys;
pub mod tensor;
pub mod trace;
mod turn;
pub mod version;

pub use context::{Context, ExecuteQueue};
pub use counters::{Counters, counters};
pub use error::{Error, LibraryRole, Result};
pub use exit::exiting;
pub use graph::{ExecuteReport, Graph, QueuePolicy, Started, Turn};
pub use ledger::{Held, LiveEntry, Part, Site};
pub use loader::{MIN_CORE_API, MIN_SYSTEM_API};
pub use log::{LogLevel, LogRecord};
pub use metadata::{BinaryInfo, GraphInfo};
pub use perf::{PerfMode, PerfState, Vote};
pub use runtime::{PerfConfig, Runtime, RuntimeConfig, RuntimeInfo};
pub use tensor::{DataType, Quantization, TensorInfo};
pub use version::Version;

/// Locks `mutex`, taking its state even when a holder panicked: the state this crate keeps under
/// a lock is whole between statements, and one panic must not make every later caller panic.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
