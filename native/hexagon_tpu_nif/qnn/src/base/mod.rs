//! The floor: errors, versions, the exit permit, the close protocol and the crate's small
//! synchronisation helpers. Imports nothing of the crate's other layers.

pub(crate) mod closable;
pub mod error;
pub(crate) mod exit;
pub(crate) mod preflight_rules;
pub(crate) mod sync;
pub mod version;
