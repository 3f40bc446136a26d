//! Whether the caller's buffers fit a graph: how many, and how many bytes each, in the model's
//! own types or as f32. The execute paths check with these before anything reaches QNN.

use crate::base::error::{Error, Result};
use crate::model::metadata::GraphInfo;
use crate::model::tensor::TensorInfo;

/// Bytes of `tensor` as f32.
pub(crate) fn f32_bytes(role: &str, tensor: &TensorInfo) -> Result<usize> {
    tensor.element_count().checked_mul(4).ok_or_else(|| {
        Error::invalid_input(format!(
            "{role} `{}`: {} elements do not fit in memory as f32",
            tensor.name,
            tensor.element_count()
        ))
    })
}

pub(crate) fn check_count(
    role: &str,
    graph: &GraphInfo,
    tensors: &[TensorInfo],
    given: usize,
) -> Result<()> {
    if given == tensors.len() {
        return Ok(());
    }
    let names: Vec<String> = tensors.iter().map(|t| format!("`{}`", t.name)).collect();
    Err(Error::invalid_input(format!(
        "graph `{}` takes {} {role}(s) ({}), given {given}",
        graph.name,
        tensors.len(),
        names.join(", ")
    )))
}

/// Checks that `given` bytes hold `tensor`, as f32 when `as_f32` or in its own type.
pub(crate) fn check_size(
    role: &str,
    tensor: &TensorInfo,
    as_f32: bool,
    given: usize,
) -> Result<()> {
    let (expected, form) = if as_f32 {
        (f32_bytes(role, tensor)?, "f32")
    } else {
        (tensor.byte_size, tensor.data_type.name())
    };
    if given == expected {
        return Ok(());
    }
    let hint = if as_f32 && role == "input" {
        " (a binary for a quantized input is read as f32; pass quantize: :none for data in the \
         model's type)"
    } else {
        ""
    };
    Err(Error::invalid_input(format!(
        "{role} `{}`: expected {expected} bytes ({} elements of {form}, shape {:?}), \
         given {given} bytes{hint}",
        tensor.name,
        tensor.element_count(),
        tensor.dims
    )))
}

/// Checks buffers already in the model's own types (the raw [`Turn::execute`]).
pub(crate) fn check_model_buffers(
    graph: &GraphInfo,
    inputs: &[&[u8]],
    outputs: &[&mut [u8]],
) -> Result<()> {
    check_count("input", graph, &graph.inputs, inputs.len())?;
    check_count("output", graph, &graph.outputs, outputs.len())?;
    for (tensor, bytes) in graph.inputs.iter().zip(inputs) {
        check_size("input", tensor, false, bytes.len())?;
    }
    for (tensor, bytes) in graph.outputs.iter().zip(outputs) {
        check_size("output", tensor, false, bytes.len())?;
    }
    Ok(())
}
