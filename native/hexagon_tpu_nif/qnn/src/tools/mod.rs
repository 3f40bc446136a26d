//! Uses of the layers below that the object model does not need: inspecting a binary without a
//! runtime, preprocessing frames, and (test builds) probing qnn_sim.

pub mod inspect;
pub mod preprocess;
#[cfg(feature = "test-support")]
pub mod sim_probe;
