//! Calling QNN: loading its libraries and their function tables, the log callback, the device
//! platform. Imports `base` and `observe`.

pub(crate) mod calls;
pub(crate) mod loader;
pub mod log;
pub(crate) mod platform;
pub(crate) mod rpcmem;
