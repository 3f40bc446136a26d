//! No library code: this crate holds the `qnn` crate's integration tests (`tests/`, on private
//! copies of qnn_sim's `libqnn_sim.so`, and `tests/real_stack.rs` on Qualcomm's own libraries)
//! and the examples that measure the runtime on qnn_sim (`examples/`). They live here, not in
//! `qnn`, so that `qnn` does not depend on qnn_sim and the Hex package ships neither.
