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
//! converts what needs it and readies the outputs, all before the graph's turn;
//! [`Execution::run`] has QNN write the outputs straight into them; [`Execution::finish`]
//! converts the outputs asked for as f32. [`execute`] is the three in one call.
//!
//! Where the buffers are depends on the graph's context ([`crate::shared`]). With client
//! buffers, outputs are allocated from the caller's allocator (so they can be the binaries
//! returned to Elixir) and data in the model's own type is not copied, except for an execute
//! in the backend's queue ([`Execution::own_inputs`]: it outlives the caller's data). With
//! shared buffers every tensor is in one of the graph's pool: inputs are converted (or copied)
//! into theirs, and outputs in the model's own type are handed out in theirs
//! ([`Output::Shared`]).

use std::ops::DerefMut;
use std::time::Instant;

use crate::base::error::{Error, Result};
use crate::exec::graph::{ExecuteReport, Graph, Place, Places, Turn};
use crate::exec::profile;
use crate::exec::shared::SharedBuffer;
use crate::model::buffers::{check_count, check_size, f32_bytes};
use crate::model::metadata::GraphInfo;
use crate::model::quant;
use crate::model::tensor::TensorInfo;
use crate::model::tensor::f32_form::F32Form;
use crate::observe::counters;
use crate::observe::trace::{self, Phase};

/// Largest buffer [`execute`] asks its caller to allocate. The caller's allocation may abort
/// the process when it fails (an Erlang binary's does), so absurd sizes are refused up front.
pub const MAX_TENSOR_BYTES: usize = 1 << 30;

/// What the caller's bytes for a tensor are: in the model's own type (passed to QNN untouched),
/// f32 (converted with the tensor's quantization parameters), or (inputs only) the source a
/// [`Writer`] makes the tensor's bytes from, straight into the buffer QNN reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Model,
    F32,
    Written,
}

/// Writes input `index`'s bytes, in the model's own type, into `dst` (the buffer QNN reads:
/// the tensor's shared buffer, or the client buffer), from the caller's bytes `src`: a camera
/// frame's preprocessing pass, so its output is never copied.
pub type Writer<'w> = &'w dyn Fn(usize, &[u8], &mut [u8]) -> Result<()>;

/// The conversion `mode` asks of `tensor`: `None` when the bytes go to QNN as they are (or
/// are written for it).
fn conversion<'t>(role: &str, tensor: &'t TensorInfo, mode: Mode) -> Result<Option<&'t F32Form>> {
    match (mode, &tensor.f32_form) {
        (Mode::Model | Mode::Written, _) | (Mode::F32, Ok(F32Form::Same)) => Ok(None),
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

/// Where an input's bytes are for QNN.
enum Input {
    /// The caller's, in the model's type: given again to [`Execution::run`].
    Given,
    /// Converted or written here, or copied for the backend's queue.
    Owned(Vec<u8>),
    /// In its shared buffer, converted, written or copied there.
    Shared(SharedBuffer),
}

/// What QNN writes an output into.
enum RawOutput<B> {
    Client(B),
    Shared(SharedBuffer),
}

impl<B: DerefMut<Target = [u8]>> RawOutput<B> {
    fn place(&mut self) -> Place {
        match self {
            RawOutput::Client(buffer) => Place::client_mut(buffer),
            RawOutput::Shared(buffer) => Place::Shared(&*buffer),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            RawOutput::Client(buffer) => buffer,
            RawOutput::Shared(buffer) => buffer,
        }
    }
}

/// An output as its caller gets it from [`Execution::finish`].
#[derive(Debug)]
pub enum Output<B> {
    /// A buffer from the caller's allocator: converted to f32, or written by QNN as a client
    /// buffer.
    Buffer(B),
    /// The shared buffer QNN wrote, in the model's own type: it goes back to its graph's pool
    /// when dropped, so the caller hands it on rather than copying it.
    Shared(SharedBuffer),
}

impl<B: std::ops::Deref<Target = [u8]>> std::ops::Deref for Output<B> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Output::Buffer(buffer) => buffer,
            Output::Shared(buffer) => buffer,
        }
    }
}

/// An execute prepared before its turn: inputs checked and converted, output buffers ready.
/// [`prepare`] runs on the caller's thread, so converting the next input overlaps the graph's
/// running execute; [`Execution::run`] needs the turn; [`Execution::finish`] converts the
/// outputs once the turn is passed on. On a graph with shared buffers ([`crate::shared`])
/// every input and output is in one: inputs are converted (or copied) straight into theirs.
pub struct Execution<B> {
    inputs: Vec<Input>,
    /// What QNN writes: one buffer per output, in the model's own type.
    raw_outputs: Vec<RawOutput<B>>,
    output_modes: Vec<Mode>,
}

/// Checks the caller's data for `graph` and prepares an execute of it. `inputs[i]` holds input
/// `i` in the form `input_modes[i]` says; outputs come back in the forms `output_modes` says.
/// Output buffers are asked of `alloc` (so outputs can be the binaries returned to Elixir),
/// or taken from the graph's shared buffers.
pub fn prepare<B: DerefMut<Target = [u8]>>(
    graph: &Graph,
    inputs: &[&[u8]],
    input_modes: &[Mode],
    output_modes: &[Mode],
    alloc: impl FnMut(usize) -> B,
) -> Result<Execution<B>> {
    prepare_written(graph, inputs, input_modes, output_modes, None, alloc)
}

/// [`prepare`], with `writer` making the inputs whose mode is [`Mode::Written`] (refused
/// without one).
pub fn prepare_written<B: DerefMut<Target = [u8]>>(
    graph: &Graph,
    inputs: &[&[u8]],
    input_modes: &[Mode],
    output_modes: &[Mode],
    writer: Option<Writer<'_>>,
    mut alloc: impl FnMut(usize) -> B,
) -> Result<Execution<B>> {
    let pool = graph.shared_pool();
    let graph = graph.info();
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
        if mode == Mode::Written {
            return Err(Error::invalid_input(format!(
                "output `{}`: only inputs are written",
                tensor.name
            )));
        }
        conversion("output", tensor, mode)?;
    }

    let quantize = trace::span(Phase::Quantize, &graph.name);
    let mut prepared = Vec::with_capacity(inputs.len());
    for (index, ((tensor, &bytes), &mode)) in
        (graph.inputs.iter().zip(inputs).zip(input_modes)).enumerate()
    {
        if mode == Mode::Written {
            let writer = writer.ok_or_else(|| Error::Internal {
                message: format!(
                    "input `{}` is to be written, and no writer was given",
                    tensor.name
                ),
            })?;
            prepared.push(match pool {
                Some(pool) => {
                    let mut shared = pool.take_input(index)?;
                    writer(index, bytes, &mut shared)?;
                    Input::Shared(shared)
                }
                None => {
                    let mut owned = vec![0u8; tensor.byte_size];
                    writer(index, bytes, &mut owned)?;
                    Input::Owned(owned)
                }
            });
            continue;
        }
        let form = conversion("input", tensor, mode)?;
        check_size("input", tensor, form.is_some(), bytes.len())?;
        prepared.push(match (pool, form) {
            (None, None) => Input::Given,
            (None, Some(form)) => {
                let mut model = vec![0u8; tensor.byte_size];
                to_model(tensor, form, bytes, &mut model)?;
                Input::Owned(model)
            }
            (Some(pool), form) => {
                let mut shared = pool.take_input(index)?;
                match form {
                    Some(form) => to_model(tensor, form, bytes, &mut shared)?,
                    None => {
                        shared.copy_from_slice(bytes);
                        counters::record_host_copy(bytes.len() as u64);
                    }
                }
                Input::Shared(shared)
            }
        });
    }

    drop(quantize);
    let mut raw_outputs = Vec::with_capacity(graph.outputs.len());
    for (index, tensor) in graph.outputs.iter().enumerate() {
        raw_outputs.push(match pool {
            // QNN writes every byte of a successful execute's outputs; a failed one's are never
            // handed out, so a reused buffer needs no clearing.
            Some(pool) => RawOutput::Shared(pool.take_output(index)?),
            None => {
                let mut buffer = allocate(&mut alloc, "output", tensor, tensor.byte_size)?;
                buffer.fill(0);
                RawOutput::Client(buffer)
            }
        });
    }
    Ok(Execution {
        inputs: prepared,
        raw_outputs,
        output_modes: output_modes.to_vec(),
    })
}

/// Quantizes (or narrows) `bytes` of f32 into `model`, timed and counted.
fn to_model(tensor: &TensorInfo, form: &F32Form, bytes: &[u8], model: &mut [u8]) -> Result<()> {
    let started = Instant::now();
    form.to_model(bytes, model)
        .map_err(|e| conversion_failed("input", tensor, e))?;
    counters::record_conversion(true, elapsed_ns(started));
    Ok(())
}

impl<B: DerefMut<Target = [u8]>> Execution<B> {
    /// Where each buffer is. `given` are the inputs [`prepare`] was given: those it left in
    /// place go to QNN as client buffers, checked again here (they are the caller's).
    fn places(&mut self, graph: &GraphInfo, given: Option<&[&[u8]]>) -> Result<Places> {
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for (index, input) in self.inputs.iter().enumerate() {
            inputs.push(match input {
                Input::Given => {
                    let bytes = given.and_then(|given| given.get(index)).ok_or_else(|| {
                        Error::Internal {
                            message: format!("input #{index}: its bytes were not given again"),
                        }
                    })?;
                    check_size("input", &graph.inputs[index], false, bytes.len())?;
                    Place::client(bytes)
                }
                Input::Owned(bytes) => Place::client(bytes),
                Input::Shared(buffer) => Place::Shared(buffer),
            });
        }
        let outputs = self.raw_outputs.iter_mut().map(RawOutput::place).collect();
        Ok(Places { inputs, outputs })
    }

    /// Runs the graph once, with the turn, profiled at `level` if given (see
    /// [`Turn::execute_profiled`]). `given` are the inputs [`prepare`] was given: those it did
    /// not convert go to QNN in place.
    pub fn run(
        &mut self,
        turn: &Turn<'_>,
        given: &[&[u8]],
        level: Option<profile::Level>,
    ) -> Result<(ExecuteReport, Option<profile::Profile>)> {
        let places = self.places(turn.graph().info(), Some(given))?;
        // SAFETY: every buffer is its tensor's size (prepared so, or checked by `places`), and
        // lives, unmoved, for the call: the given inputs are borrowed, the rest is `self`'s,
        // borrowed mutably.
        unsafe { turn.execute_unchecked(&places, level) }
    }

    /// Copies the inputs [`prepare`] left in place (`given`, as it was given them) into the
    /// execution, so that it owns every buffer QNN reads: an execute in the backend's queue
    /// outlives the caller's data.
    pub fn own_inputs(&mut self, given: &[&[u8]]) {
        for (input, given) in self.inputs.iter_mut().zip(given) {
            if let Input::Given = input {
                counters::record_host_copy(given.len() as u64);
                *input = Input::Owned(given.to_vec());
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
        // No inputs given again: one not owned is refused.
        let places = match boxed.places(turn.graph().info(), None) {
            Ok(places) => places,
            Err(error) => return done(*boxed, Err(error)),
        };
        // SAFETY: every buffer is its tensor's size and owned by `boxed`, which the callback
        // keeps, unmoved on the heap and untouched, until QNN notifies the execute.
        unsafe {
            turn.execute_async_unchecked(places, Box::new(move |result| done(*boxed, result)))
        }
    }

    /// The outputs in the forms asked for: QNN's buffers as they are (a shared one handed on),
    /// or converted to f32 into buffers from `alloc`.
    pub fn finish(
        self,
        graph: &GraphInfo,
        mut alloc: impl FnMut(usize) -> B,
    ) -> Result<Vec<Output<B>>> {
        let _dequantize = trace::span(Phase::Dequantize, &graph.name);
        let mut outputs = Vec::with_capacity(self.raw_outputs.len());
        for ((raw, tensor), &mode) in self
            .raw_outputs
            .into_iter()
            .zip(&graph.outputs)
            .zip(&self.output_modes)
        {
            outputs.push(match (conversion("output", tensor, mode)?, raw) {
                (None, RawOutput::Client(buffer)) => Output::Buffer(buffer),
                (None, RawOutput::Shared(buffer)) => Output::Shared(buffer),
                (Some(form), raw) => {
                    let mut f32s =
                        allocate(&mut alloc, "output", tensor, f32_bytes("output", tensor)?)?;
                    let started = Instant::now();
                    form.to_f32(raw.bytes(), &mut f32s)
                        .map_err(|e| conversion_failed("output", tensor, e))?;
                    counters::record_conversion(false, elapsed_ns(started));
                    Output::Buffer(f32s)
                }
            });
        }
        Ok(outputs)
    }
}

/// Runs the graph once on the caller's data, with the turn: [`prepare`], [`Execution::run`] and
/// [`Execution::finish`] in one call. Data in the model's own type is not copied (but into a
/// shared buffer).
pub fn execute<B: DerefMut<Target = [u8]>>(
    turn: &Turn<'_>,
    inputs: &[&[u8]],
    input_modes: &[Mode],
    output_modes: &[Mode],
    mut alloc: impl FnMut(usize) -> B,
) -> Result<(Vec<Output<B>>, ExecuteReport)> {
    let graph = turn.graph();
    let _span = trace::span(Phase::Execute, graph.name());
    let mut execution = prepare(graph, inputs, input_modes, output_modes, &mut alloc)?;
    let (report, _) = execution.run(turn, inputs, None)?;
    Ok((execution.finish(graph.info(), alloc)?, report))
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
