//! Execute I/O: the one place where a caller's data is checked against a graph's tensors and
//! converted to and from the buffers QNN reads and writes.
//!
//! Each tensor's f32 form is decided once, when its metadata is read
//! ([`TensorInfo::f32_conversion`]): quantized tensors (per-tensor or per-axis) are quantized /
//! dequantized with the kernels in [`crate::quant`], f16 tensors are narrowed / widened, f32
//! tensors need nothing. Anything else (plain integers, booleans, 4-bit, unsupported encodings)
//! has no f32 form and is passed in the model's own type. The quantization parameters were
//! checked then too, so an execute checks only what the caller gives: counts, modes, byte sizes.
//!
//! An execute is prepared, run and finished ([`Execution`]): [`prepare`] checks every input,
//! converts what needs it and allocates the outputs from the caller's allocator (so they can be
//! the binaries returned to Elixir), all before the graph's turn; [`Execution::run`] has QNN
//! write the outputs straight into them; [`Execution::finish`] converts the outputs asked for
//! as f32. [`execute`] is the three in one call. Data in the model's own type is not copied, except
//! for an execute in the backend's queue ([`Execution::own_inputs`]: it outlives the caller's data).

use std::ops::DerefMut;
use std::time::Instant;

use crate::base::error::{Error, Result};
use crate::exec::graph::{ExecuteReport, Turn};
use crate::exec::profile;
use crate::model::buffers::{check_count, check_model_buffers, check_size, f32_bytes};
use crate::model::metadata::GraphInfo;
use crate::model::quant;
use crate::model::tensor::TensorInfo;
use crate::model::tensor::f32_form::F32Form;
use crate::observe::counters;
use crate::observe::trace::{self, Phase};

/// Largest buffer [`execute`] asks its caller to allocate. The caller's allocation may abort
/// the process when it fails (an Erlang binary's does), so absurd sizes are refused up front.
pub const MAX_TENSOR_BYTES: usize = 1 << 30;

/// What the caller's bytes for a tensor are: in the model's own type (passed to QNN untouched)
/// or f32 (converted with the tensor's quantization parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Model,
    F32,
}

/// The conversion `mode` asks of `tensor`: `None` when the bytes go to QNN as they are.
fn conversion<'t>(role: &str, tensor: &'t TensorInfo, mode: Mode) -> Result<Option<&'t F32Form>> {
    match (mode, &tensor.f32_form) {
        (Mode::Model, _) | (Mode::F32, Ok(F32Form::Same)) => Ok(None),
        (Mode::F32, Ok(form)) => Ok(Some(form)),
        (Mode::F32, Err(why)) => Err(Error::invalid_input(format!(
            "{role} `{}` {why}; pass it in the model's own type \
             (quantize: :none / dequantize: :none)",
            tensor.name
        ))),
    }
}

/// Buffer `size` bytes long from the caller's allocator, for `tensor`.
fn allocate<B: DerefMut<Target = [u8]>>(
    alloc: &mut impl FnMut(usize) -> B,
    role: &str,
    tensor: &TensorInfo,
    size: usize,
) -> Result<B> {
    if size > MAX_TENSOR_BYTES {
        return Err(Error::invalid_input(format!(
            "{role} `{}` needs {size} bytes, more than the {MAX_TENSOR_BYTES} bytes allowed per \
             tensor",
            tensor.name
        )));
    }
    let buffer = alloc(size);
    if buffer.len() != size {
        return Err(Error::Internal {
            message: format!("asked for {size} bytes, given {}", buffer.len()),
        });
    }
    Ok(buffer)
}

fn elapsed_ns(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn conversion_failed(role: &str, tensor: &TensorInfo, error: quant::QuantError) -> Error {
    Error::Internal {
        message: format!("{role} `{}`: {error}", tensor.name),
    }
}

/// An execute prepared before its turn: inputs checked and converted, output buffers allocated.
/// [`prepare`] runs on the caller's thread, so converting the next input overlaps the graph's
/// running execute; [`Execution::run`] needs the turn; [`Execution::finish`] converts the
/// outputs once the turn is passed on.
pub struct Execution<B> {
    /// Per input: its bytes converted to the model's type, or `None` when the caller's bytes go
    /// to QNN in place (given again to [`Execution::run`]).
    converted: Vec<Option<Vec<u8>>>,
    /// What QNN writes: one buffer per output, in the model's own type.
    raw_outputs: Vec<B>,
    output_modes: Vec<Mode>,
}

/// Checks the caller's data for `graph` and prepares an execute of it. `inputs[i]` holds input
/// `i` in the form `input_modes[i]` says; outputs come back in the forms `output_modes` says.
/// Every buffer is asked of `alloc` (so outputs can be the binaries returned to Elixir).
pub fn prepare<B: DerefMut<Target = [u8]>>(
    graph: &GraphInfo,
    inputs: &[&[u8]],
    input_modes: &[Mode],
    output_modes: &[Mode],
    mut alloc: impl FnMut(usize) -> B,
) -> Result<Execution<B>> {
    check_count("input", graph, &graph.inputs, inputs.len())?;
    if input_modes.len() != graph.inputs.len() || output_modes.len() != graph.outputs.len() {
        return Err(Error::invalid_input(format!(
            "graph `{}`: expected {} input mode(s) and {} output mode(s), given {} and {}",
            graph.name,
            graph.inputs.len(),
            graph.outputs.len(),
            input_modes.len(),
            output_modes.len()
        )));
    }
    for (tensor, &mode) in graph.outputs.iter().zip(output_modes) {
        conversion("output", tensor, mode)?;
    }

    let quantize = trace::span(Phase::Quantize, &graph.name);
    let mut converted = Vec::with_capacity(inputs.len());
    for ((tensor, &bytes), &mode) in graph.inputs.iter().zip(inputs).zip(input_modes) {
        let form = conversion("input", tensor, mode)?;
        check_size("input", tensor, form.is_some(), bytes.len())?;
        converted.push(match form {
            None => None,
            Some(form) => {
                let mut model = vec![0u8; tensor.byte_size];
                let started = Instant::now();
                form.to_model(bytes, &mut model)
                    .map_err(|e| conversion_failed("input", tensor, e))?;
                counters::record_conversion(true, elapsed_ns(started));
                Some(model)
            }
        });
    }

    drop(quantize);
    let mut raw_outputs = Vec::with_capacity(graph.outputs.len());
    for tensor in &graph.outputs {
        let mut buffer = allocate(&mut alloc, "output", tensor, tensor.byte_size)?;
        buffer.fill(0);
        raw_outputs.push(buffer);
    }
    Ok(Execution {
        converted,
        raw_outputs,
        output_modes: output_modes.to_vec(),
    })
}

impl<B: DerefMut<Target = [u8]>> Execution<B> {
    /// Runs the graph once, with the turn, profiled at `level` if given
    /// ([`Turn::execute_profiled`]). `given` are the inputs [`prepare`] was given: those it did
    /// not convert go to QNN in place.
    pub fn run(
        &mut self,
        turn: &Turn<'_>,
        given: &[&[u8]],
        level: Option<profile::Level>,
    ) -> Result<(ExecuteReport, Option<profile::Profile>)> {
        let inputs: Vec<&[u8]> = (self.converted.iter())
            .zip(given)
            .map(|(converted, given)| converted.as_deref().unwrap_or(given))
            .collect();
        let mut outputs: Vec<&mut [u8]> = self.raw_outputs.iter_mut().map(|b| &mut **b).collect();
        // Counts and sizes are checked there, as for any caller's buffers.
        turn.execute_profiled(&inputs, &mut outputs, level)
    }

    /// Copies the inputs [`prepare`] left in place (`given`, as it was given them) into the
    /// execution, so that it owns every buffer QNN reads: an execute in the backend's queue
    /// outlives the caller's data.
    pub fn own_inputs(&mut self, given: &[&[u8]]) {
        for (converted, given) in self.converted.iter_mut().zip(given) {
            if converted.is_none() {
                *converted = Some(given.to_vec());
            }
        }
    }

    /// Queues the execute in the backend's asynchronous queue (the graph's
    /// [`ExecuteQueue::Backend`](crate::context::ExecuteQueue)), holding the turn only while it
    /// is handed over. `done` gets the execution back with the result, on a thread of the
    /// backend's when QNN notifies it, or here when it could not be queued. Needs every input
    /// owned ([`Execution::own_inputs`]); blocks while the backend's queue is full.
    pub fn run_on_backend(
        self,
        turn: &Turn<'_>,
        done: impl FnOnce(Execution<B>, Result<ExecuteReport>) + Send + 'static,
    ) where
        B: Send + 'static,
    {
        // On the heap, so the buffers QNN is pointed at stay where they are until `done`.
        let mut boxed = Box::new(self);
        let graph = turn.graph().info();
        let tensors = {
            let Execution {
                converted,
                raw_outputs,
                ..
            } = &mut *boxed;
            // Every input owned: one that is not leaves the list short, and the check refuses it.
            let inputs: Vec<&[u8]> = converted.iter().flatten().map(Vec::as_slice).collect();
            let mut outputs: Vec<&mut [u8]> = raw_outputs.iter_mut().map(|b| &mut **b).collect();
            if let Err(error) = check_model_buffers(graph, &inputs, &outputs) {
                return done(*boxed, Err(error));
            }
            turn.tensors(&inputs, &mut outputs)
        };
        // SAFETY: one buffer per tensor, each exactly its tensor's size (checked above), all
        // owned by `boxed`, which the callback keeps, unmoved on the heap and untouched, until
        // QNN notifies the execute.
        unsafe {
            turn.execute_async_unchecked(tensors, Box::new(move |result| done(*boxed, result)))
        }
    }

    /// The outputs in the forms asked for: QNN's buffers as they are, or converted to f32 into
    /// buffers from `alloc`.
    pub fn finish(self, graph: &GraphInfo, mut alloc: impl FnMut(usize) -> B) -> Result<Vec<B>> {
        let _dequantize = trace::span(Phase::Dequantize, &graph.name);
        let mut outputs = Vec::with_capacity(self.raw_outputs.len());
        for ((buffer, tensor), &mode) in self
            .raw_outputs
            .into_iter()
            .zip(&graph.outputs)
            .zip(&self.output_modes)
        {
            match conversion("output", tensor, mode)? {
                None => outputs.push(buffer),
                Some(form) => {
                    let mut f32s =
                        allocate(&mut alloc, "output", tensor, f32_bytes("output", tensor)?)?;
                    let started = Instant::now();
                    form.to_f32(&buffer, &mut f32s)
                        .map_err(|e| conversion_failed("output", tensor, e))?;
                    counters::record_conversion(false, elapsed_ns(started));
                    outputs.push(f32s);
                }
            }
        }
        Ok(outputs)
    }
}

/// Runs the graph once on the caller's data, with the turn: [`prepare`], [`Execution::run`] and
/// [`Execution::finish`] in one call. Data in the model's own type is not copied.
pub fn execute<B: DerefMut<Target = [u8]>>(
    turn: &Turn<'_>,
    inputs: &[&[u8]],
    input_modes: &[Mode],
    output_modes: &[Mode],
    mut alloc: impl FnMut(usize) -> B,
) -> Result<(Vec<B>, ExecuteReport)> {
    let graph = turn.graph().info();
    let _span = trace::span(Phase::Execute, &graph.name);
    let mut execution = prepare(graph, inputs, input_modes, output_modes, &mut alloc)?;
    let (report, _) = execution.run(turn, inputs, None)?;
    Ok((execution.finish(graph, alloc)?, report))
}

/// Converts caller f32 data (little-endian bytes) into the tensor's own type, for callers that
/// run [`Turn::execute`] on their own buffers.
pub fn input_from_f32(tensor: &TensorInfo, src_f32: &[u8], dst: &mut [u8]) -> Result<()> {
    convert_one("input", tensor, src_f32, dst, true)
}

/// Converts a tensor's own data into f32 (little-endian bytes); see [`input_from_f32`].
pub fn output_to_f32(tensor: &TensorInfo, src: &[u8], dst_f32: &mut [u8]) -> Result<()> {
    convert_one("output", tensor, src, dst_f32, false)
}

fn convert_one(
    role: &str,
    tensor: &TensorInfo,
    src: &[u8],
    dst: &mut [u8],
    from_f32: bool,
) -> Result<()> {
    let form = match &tensor.f32_form {
        Ok(form) => form,
        Err(why) => {
            return Err(Error::invalid_input(format!(
                "{role} `{}` {why}",
                tensor.name
            )));
        }
    };
    let (f32_side, model_side) = if from_f32 { (src, &*dst) } else { (&*dst, src) };
    check_size(role, tensor, true, f32_side.len())?;
    check_size(role, tensor, false, model_side.len())?;
    let result = if from_f32 {
        form.to_model(src, dst)
    } else {
        form.to_f32(src, dst)
    };
    result.map_err(|e| conversion_failed(role, tensor, e))
}
