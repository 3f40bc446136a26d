//! The floor: errors, versions, the exit permit, the close protocol and the crate's small
//! synchronisation helpers. Imports nothing of the crate's other layers.

pub(crate) mod closable;
#[cfg(any(test, feature = "test-support"))]
pub mod counting_alloc;
pub mod error;
pub(crate) mod exit;
pub(crate) mod preflight_rules;
pub(crate) mod sync;
pub mod version;
