//! `HexagonTpu.Graph`: retrieve a graph from a context, execute it, close it.
//!
//! Execute is where the bytes move. Inputs arrive as Erlang binaries: one already in the
//! model's dtype is handed to QNN in place; an f32 one is quantized (or narrowed to f16) into a
//! scratch buffer. Outputs are Erlang binaries allocated at their exact size that QNN writes
//! into; an output the caller wants as f32 is dequantized into a second binary. Everything the
//! caller can get wrong is checked before QNN is called.

use rustler::{Binary, Encoder, Env, NifUnitEnum, OwnedBinary, ResourceArc, Term};

use crate::atoms;
use crate::error::{Failure, ok_or_error};
use crate::quote;
use crate::reply::{ReplyTo, answer};
use crate::resources::{ContextRes, GraphRes};
use crate::runtime::encode_unit;
use crate::terms::GraphInfoTerm;

/// Largest tensor this binding allocates. `enif_alloc_binary` failing aborts the VM (rustler
/// turns it into `handle_alloc_error`), so absurd sizes are refused up front.
const MAX_TENSOR_BYTES: usize = 1 << 30;

/// How the caller's bytes relate to a tensor: `:model` (the model's own dtype, passed through
/// untouched) or `:f32` (converted with the tensor's quantization parameters).
#[derive(NifUnitEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Model,
    F32,
}

/// `{:ok, {graph_ref, graph_info}} | {:error, %HexagonTpu.Error{}}`. `site` is the Elixir
/// caller, for the ledger of live objects.
#[rustler::nif(schedule = "DirtyIo")]
fn graph_retrieve<'a>(
    env: Env<'a>,
    context: ResourceArc<ContextRes>,
    name: String,
    site: String,
) -> Term<'a> {
    let result = qnn::Graph::retrieve_at(&context.0, &name, &site)
        .map_err(quote::capped)
        .map(|graph| {
            let info = GraphInfoTerm::new(env, graph.info());
            (ResourceArc::new(GraphRes(graph)), info)
        });
    ok_or_error(env, result)
}

/// Closes the graph once the executes running or queued before it are done: `:ok` directly,
/// or by message when the graph was busy. Never waits.
#[rustler::nif]
fn graph_close<'a>(env: Env<'a>, graph: ResourceArc<GraphRes>, tag: Term<'a>) -> Term<'a> {
    answer(env, tag, encode_unit, |done| graph.0.close_then(done))
}

/// `{:ok, {[output_binary], execute_ns}} | {:error, %HexagonTpu.Error{}}` when the graph was
/// idle (the execute ran here), or `:queued` when it was busy: the execute then runs on the
/// graph's own thread after the ones before it, and the result follows by message (see
/// `crate::reply`). No scheduler ever waits for another caller's execute.
///
/// `inputs` in model order; `input_modes` / `output_modes` say, per tensor, whether the bytes
/// are in the model's dtype (`:model`) or f32 (`:f32`).
#[rustler::nif(schedule = "DirtyCpu")]
fn graph_execute<'a>(
    env: Env<'a>,
    graph: ResourceArc<GraphRes>,
    inputs: Term<'a>,
    input_modes: Vec<Mode>,
    output_modes: Vec<Mode>,
    tag: Term<'a>,
) -> Term<'a> {
    let started = graph.0.execute_or_queue(
        |turn| run(env, &turn, inputs, &input_modes, &output_modes),
        || {
            let reply = ReplyTo::new(env, tag);
            let inputs = reply.save(inputs);
            let (input_modes, output_modes) = (input_modes.clone(), output_modes.clone());
            Box::new(move |turn: qnn::Turn<'_>| {
                reply.send(|env| run(env, &turn, inputs.load(env), &input_modes, &output_modes))
            })
        },
    );
    match started {
        qnn::Started::Ran(result) => result,
        qnn::Started::Queued => atoms::queued().encode(env),
    }
}

fn run<'a>(
    env: Env<'a>,
    turn: &qnn::Turn<'_>,
    inputs: Term<'a>,
    input_modes: &[Mode],
    output_modes: &[Mode],
) -> Term<'a> {
    let result = inputs
        .decode::<Vec<Term<'a>>>()
        .map_err(|_| Failure::InvalidInput("inputs must be a list".to_string()))
        .and_then(|inputs| execute(env, turn, &inputs, input_modes, output_modes));
    ok_or_error(env, result)
}

/// An input ready for QNN: the caller's bytes in place, or converted ones.
enum Prepared<'a> {
    Borrowed(&'a [u8]),
    Converted(Vec<u8>),
}

impl Prepared<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Prepared::Borrowed(bytes) => bytes,
            Prepared::Converted(bytes) => bytes,
        }
    }
}

fn execute<'a>(
    env: Env<'a>,
    turn: &qnn::Turn<'_>,
    inputs: &[Term<'a>],
    input_modes: &[Mode],
    output_modes: &[Mode],
) -> Result<(Vec<Binary<'a>>, u64), Failure> {
    let info = turn.graph().info();
    if inputs.len() != info.inputs.len() {
        return Err(Failure::InvalidInput(format!(
            "graph `{}` takes {} input(s) ({}), given {}",
            info.name,
            info.inputs.len(),
            names(&info.inputs),
            inputs.len()
        )));
    }
    if input_modes.len() != inputs.len() || output_modes.len() != info.outputs.len() {
        return Err(Failure::InvalidInput(format!(
            "graph `{}`: expected {} input mode(s) and {} output mode(s), given {} and {}",
            info.name,
            info.inputs.len(),
            info.outputs.len(),
            input_modes.len(),
            output_modes.len()
        )));
    }
    for (tensor, mode) in info.outputs.iter().zip(output_modes) {
        check_mode("output", tensor, *mode)?;
    }

    let mut prepared = Vec::with_capacity(inputs.len());
    for (index, ((term, mode), tensor)) in
        inputs.iter().zip(input_modes).zip(&info.inputs).enumerate()
    {
        let binary = Binary::from_term(*term).map_err(|_| {
            Failure::InvalidInput(format!(
                "input `{}` (#{index}): expected a binary, given {:?}",
                tensor.name,
                term.get_type()
            ))
        })?;
        prepared.push(prepare_input(tensor, binary.as_slice(), *mode)?);
    }

    let mut raw = Vec::with_capacity(info.outputs.len());
    for tensor in &info.outputs {
        raw.push(alloc_zeroed("output", tensor, tensor.byte_size)?);
    }
    let report = {
        let input_slices: Vec<&[u8]> = prepared.iter().map(Prepared::bytes).collect();
        let mut output_slices: Vec<&mut [u8]> =
            raw.iter_mut().map(OwnedBinary::as_mut_slice).collect();
        turn.execute(&input_slices, &mut output_slices)?
    };
    drop(prepared);

    let mut outputs = Vec::with_capacity(raw.len());
    for ((binary, tensor), mode) in raw.into_iter().zip(&info.outputs).zip(output_modes) {
        if converts(tensor, *mode) {
            let mut f32s = alloc_zeroed("output", tensor, f32_bytes("output", tensor)?)?;
            qnn::convert::output_to_f32(tensor, binary.as_slice(), f32s.as_mut_slice())?;
            outputs.push(f32s.release(env));
        } else {
            outputs.push(binary.release(env));
        }
    }
    Ok((outputs, report.execute_ns))
}

/// Whether `mode` asks for a conversion (f32 data for a tensor that is not f32 already).
fn converts(tensor: &qnn::TensorInfo, mode: Mode) -> bool {
    mode == Mode::F32 && tensor.data_type != qnn::DataType::Float32
}

fn check_mode(role: &str, tensor: &qnn::TensorInfo, mode: Mode) -> Result<(), Failure> {
    if converts(tensor, mode) && !qnn::convert::converts_from_f32(tensor) {
        return Err(Failure::InvalidInput(format!(
            "{role} `{}` is {} ({}) and has no f32 conversion; use the model's dtype \
             (quantize: :none / dequantize: :none)",
            tensor.name,
            tensor.data_type.name(),
            describe_quantization(&tensor.quantization)
        )));
    }
    Ok(())
}

fn prepare_input<'b>(
    tensor: &qnn::TensorInfo,
    bytes: &'b [u8],
    mode: Mode,
) -> Result<Prepared<'b>, Failure> {
    check_mode("input", tensor, mode)?;
    if !converts(tensor, mode) {
        if bytes.len() != tensor.byte_size {
            return Err(size_mismatch(
                tensor,
                tensor.data_type.name(),
                tensor.byte_size,
                bytes.len(),
            ));
        }
        return Ok(Prepared::Borrowed(bytes));
    }
    let expected = f32_bytes("input", tensor)?;
    if bytes.len() != expected {
        return Err(size_mismatch(tensor, "f32", expected, bytes.len()));
    }
    let mut converted = vec![0u8; tensor.byte_size];
    qnn::convert::input_from_f32(tensor, bytes, &mut converted)?;
    Ok(Prepared::Converted(converted))
}

fn size_mismatch(tensor: &qnn::TensorInfo, dtype: &str, expected: usize, given: usize) -> Failure {
    Failure::InvalidInput(format!(
        "input `{}`: expected {expected} bytes ({} elements of {dtype}, shape {:?}), given {given} bytes",
        tensor.name,
        tensor.element_count(),
        tensor.dims
    ))
}

fn f32_bytes(role: &str, tensor: &qnn::TensorInfo) -> Result<usize, Failure> {
    tensor.element_count().checked_mul(4).ok_or_else(|| {
        Failure::InvalidInput(format!(
            "{role} `{}`: {} elements do not fit in memory as f32",
            tensor.name,
            tensor.element_count()
        ))
    })
}

fn alloc_zeroed(role: &str, tensor: &qnn::TensorInfo, size: usize) -> Result<OwnedBinary, Failure> {
    if size > MAX_TENSOR_BYTES {
        return Err(Failure::InvalidInput(format!(
            "{role} `{}` needs {size} bytes, more than the {MAX_TENSOR_BYTES} bytes allowed per tensor",
            tensor.name
        )));
    }
    let mut binary = OwnedBinary::new(size);
    // QNN is trusted to fill outputs, but a backend that writes less must not leak old heap
    // contents into Elixir.
    binary.as_mut_slice().fill(0);
    Ok(binary)
}

fn names(tensors: &[qnn::TensorInfo]) -> String {
    tensors
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_quantization(q: &qnn::Quantization) -> String {
    match q {
        qnn::Quantization::None => "no quantization".to_string(),
        qnn::Quantization::PerTensor { .. } => "per-tensor quantization".to_string(),
        qnn::Quantization::PerAxis { .. } => "per-axis quantization".to_string(),
        qnn::Quantization::Unsupported { encoding } => format!("{encoding} encoding"),
    }
}
