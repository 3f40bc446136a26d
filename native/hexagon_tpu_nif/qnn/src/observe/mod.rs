//! What the crate tells about itself: process-wide counters, the ledger of live objects, the
//! trace ring. Imports only [`base`](crate::base).

pub mod counters;
#[cfg(feature = "test-support")]
pub(crate) mod hooks;
pub mod ledger;
pub mod trace;
