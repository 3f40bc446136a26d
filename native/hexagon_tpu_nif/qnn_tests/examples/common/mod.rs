//! What the examples share.

use std::sync::Arc;

use qnn::Site;
use qnn::{Runtime, RuntimeConfig};

/// A runtime on qnn_sim's own library (the backend and the system library), logging errors
/// only, so that QNN's log lines stay out of the figures.
pub fn sim_runtime() -> Arc<Runtime> {
    let lib = qnn_sim::testing::cdylib_path();
    Runtime::new(
        &RuntimeConfig {
            backend_lib: lib.clone(),
            system_lib: lib,
            rpcmem_lib: qnn::shared::DEFAULT_RPCMEM_LIB.into(),
            log_level: Some(qnn::LogLevel::Error),
            performance: Default::default(),
        },
        &Site::here(),
    )
    .expect("runtime")
}
