//! Uses of the layers below that the object model does not need: inspecting a binary without a
//! runtime, preprocessing frames, postprocessing outputs, and (test builds) probing qnn_sim.

pub mod inspect;
pub mod postprocess;
pub mod preprocess;
#[cfg(feature = "test-support")]
pub mod sim_probe;
