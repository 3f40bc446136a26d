//! The object model and running it: the runtime's owner thread, performance votes, `Runtime` →
//! `Context` → `Graph`, a graph's turn, profiles and an execute's I/O. Imports every layer
//! below it.

pub mod context;
pub mod graph;
pub mod io;
pub(crate) mod owner;
pub mod perf;
pub mod profile;
pub mod runtime;
pub mod shared;
pub(crate) mod turn;
