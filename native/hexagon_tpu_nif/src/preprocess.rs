//! `HexagonTpu.Preprocess`: a camera frame to a model input's bytes, in one pass
//! (`qnn::preprocess`). Elixir decides every parameter from the input's `TensorInfo`; this
//! decodes them, runs the pass into a binary allocated here and returns it.

use rustler::{Binary, Env, OwnedBinary};

use qnn::preprocess::{Plan, Spec};

use crate::error::Failure;
use crate::protocol::SpecArg;

/// `{:ok, binary} | {:error, %HexagonTpu.Error{reason: :invalid_input}}`: the frame (RGB or YUV)
/// as the model input's bytes. Runs on a dirty CPU scheduler (a 640x640 input is ~1 ms).
#[rustler::nif(schedule = "DirtyCpu")]
fn preprocess_image<'a>(
    env: Env<'a>,
    frame: Binary<'a>,
    spec: SpecArg,
) -> Result<Binary<'a>, Failure> {
    let invalid = |e: qnn::preprocess::PreprocessError| Failure::invalid_input(e.to_string());
    let plan = Plan::new(Spec::from(&spec)).map_err(invalid)?;
    // Aborts the VM if the allocation fails, like every binary the VM allocates.
    let mut out = OwnedBinary::new(plan.dst_len());
    plan.run(frame.as_slice(), out.as_mut_slice())
        .map_err(invalid)?;
    Ok(out.release(env))
}
