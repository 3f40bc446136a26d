//! `HexagonTpu.Context`: load a context binary (file or bytes), list its graphs, close.
//!
//! The file is opened and checked here (the caller's own I/O, on a dirty IO scheduler); the QNN
//! context is created on the runtime's thread, and the answer comes back by message.

use std::sync::Arc;

use rustler::{Binary, Encoder, Env, NifMap, NifUnitEnum, ResourceArc, Term};

use qnn::model_file::DEFAULT_MAX_BYTES;

use crate::atoms;
use crate::error::ok_or_error;
use crate::quote;
use crate::reply::answer;
use crate::resources::{ContextRes, Handle, RuntimeRes};
use crate::runtime::{encode_unit, path_from_bytes};
use crate::terms::{BinaryInfoTerm, GraphInfoTerm, findings_term};

fn encode_loaded(env: Env<'_>, result: qnn::Result<Arc<qnn::Context>>) -> Term<'_> {
    let result = result.map_err(quote::capped).map(|context| {
        let graphs: Vec<GraphInfoTerm> = context
            .graphs()
            .iter()
            .map(|g| GraphInfoTerm::new(env, g))
            .collect();
        let graphs = graphs.encode(env);
        let warnings = findings_term(env, context.warnings());
        let queue = match context.execute_queue() {
            Ok(qnn::ExecuteQueue::Backend { depth }) => (atoms::backend(), depth).encode(env),
            _ => atoms::worker().encode(env),
        };
        let buffers = match context.buffers() {
            Ok(qnn::BufferPath::Shared) => atoms::shared().encode(env),
            Ok(qnn::BufferPath::Fallback(why)) => (atoms::client(), why).encode(env),
            _ => atoms::client().encode(env),
        };
        (
            ResourceArc::new(ContextRes(context)),
            graphs,
            warnings,
            queue,
            buffers,
        )
    });
    ok_or_error(env, result)
}

/// The pre-flight mode: `:on | :strict | :off`.
#[derive(rustler::NifUnitEnum, Clone, Copy)]
pub enum PreflightArg {
    On,
    Strict,
    Off,
}

/// `:default | :low | :normal | :normal_high | :high`: the context priority (`:default` passes
/// no config).
#[derive(NifUnitEnum, Clone, Copy)]
pub enum PriorityArg {
    Default,
    Low,
    Normal,
    NormalHigh,
    High,
}

impl From<PriorityArg> for Option<qnn::context::Priority> {
    fn from(priority: PriorityArg) -> Self {
        use qnn::context::Priority as P;
        match priority {
            PriorityArg::Default => None,
            PriorityArg::Low => Some(P::Low),
            PriorityArg::Normal => Some(P::Normal),
            PriorityArg::NormalHigh => Some(P::NormalHigh),
            PriorityArg::High => Some(P::High),
        }
    }
}

/// `:auto | :on | :off`: whether the context's executes use shared buffers.
#[derive(NifUnitEnum, Clone, Copy)]
pub enum SharedBuffersArg {
    Auto,
    On,
    Off,
}

impl From<SharedBuffersArg> for qnn::BufferChoice {
    fn from(arg: SharedBuffersArg) -> Self {
        match arg {
            SharedBuffersArg::Auto => qnn::BufferChoice::Auto,
            SharedBuffersArg::On => qnn::BufferChoice::On,
            SharedBuffersArg::Off => qnn::BufferChoice::Off,
        }
    }
}

/// How a context is loaded, one map from `HexagonTpu.Context.load_args!/2`: the pre-flight
/// mode, the priority, the backend queue's depth (`nil`: executes queue on the graphs' own
/// threads), whether it is created again after a device reset, whether its executes use
/// shared buffers, and `site`, the Elixir caller, for the ledger of live objects.
#[derive(NifMap)]
pub struct LoadArgs {
    preflight: PreflightArg,
    priority: PriorityArg,
    async_queue_depth: Option<u32>,
    recover: bool,
    shared_buffers: SharedBuffersArg,
    site: String,
}

impl LoadArgs {
    fn split(self) -> (qnn::Site, qnn::context::LoadOptions) {
        let options = qnn::context::LoadOptions {
            preflight: self.preflight.into(),
            priority: self.priority.into(),
            async_queue_depth: self.async_queue_depth,
            recover: self.recover,
            shared_buffers: self.shared_buffers.into(),
        };
        (qnn::Site::named(self.site), options)
    }
}

impl From<PreflightArg> for qnn::preflight::Mode {
    fn from(mode: PreflightArg) -> Self {
        match mode {
            PreflightArg::On => qnn::preflight::Mode::On,
            PreflightArg::Strict => qnn::preflight::Mode::Strict,
            PreflightArg::Off => qnn::preflight::Mode::Off,
        }
    }
}

/// `{:ok, {context_ref, [graph_info], [warning], queue, buffers}} | {:error,
/// %HexagonTpu.Error{}}` (`queue`: `:worker` or `{:backend, depth}`; `buffers`: `:shared`,
/// `:client`, or `{:client, why}` when shared buffers were not available), directly or by
/// message. Only a regular file of at most `max_bytes` (`nil`: `qnn`'s default, 2 GiB) is
/// read. `path` is a binary, any bytes (Linux paths need not be UTF-8).
#[rustler::nif(schedule = "DirtyIo")]
fn context_from_file<'a>(
    env: Env<'a>,
    runtime: Handle<RuntimeRes>,
    path: Binary<'a>,
    max_bytes: Option<u64>,
    load: LoadArgs,
    tag: Term<'a>,
) -> Term<'a> {
    let path = path_from_bytes(path.as_slice());
    let (site, options) = load.split();
    answer(env, tag, encode_loaded, |done| match qnn::model_file::read(
        &path,
        max_bytes.unwrap_or(DEFAULT_MAX_BYTES),
    ) {
        Ok(bytes) => qnn::Context::load_with(&runtime.0, bytes, Some(&path), &site, options, done),
        Err(error) => done(Err(error)),
    })
}

/// Same as `context_from_file`, from a binary already in memory (copied once for the runtime's
/// thread).
#[rustler::nif(schedule = "DirtyIo")]
fn context_from_binary<'a>(
    env: Env<'a>,
    runtime: Handle<RuntimeRes>,
    bytes: Binary<'a>,
    load: LoadArgs,
    tag: Term<'a>,
) -> Term<'a> {
    let binary = bytes.as_slice().to_vec();
    let (site, options) = load.split();
    answer(env, tag, encode_loaded, |done| {
        qnn::Context::load_with(&runtime.0, binary, None, &site, options, done)
    })
}

/// Everything a context binary says about itself, read with the System library alone:
/// `{:ok, map} | {:error, %HexagonTpu.Error{}}`. `path` is the model file (any bytes); only a
/// regular file of at most `max_bytes` (`nil`: `qnn`'s default, 2 GiB) is read.
#[rustler::nif(schedule = "DirtyIo")]
fn inspect_model<'a>(
    env: Env<'a>,
    system_lib: Binary<'a>,
    path: Binary<'a>,
    max_bytes: Option<u64>,
) -> Term<'a> {
    let system_lib = path_from_bytes(system_lib.as_slice());
    let path = path_from_bytes(path.as_slice());
    let result = qnn::model_file::read(&path, max_bytes.unwrap_or(DEFAULT_MAX_BYTES))
        .and_then(|bytes| qnn::inspect::binary_info(&system_lib, &bytes))
        .map_err(quote::capped)
        .map(|info| BinaryInfoTerm::new(env, &info).encode(env));
    ok_or_error(env, result)
}

#[rustler::nif]
fn context_closed(context: Handle<ContextRes>) -> bool {
    context.0.is_closed()
}

/// Frees the context on the runtime's thread, once running executes on its graphs return;
/// `:ok | {:error, _}` by message. Never waits.
#[rustler::nif]
fn context_close<'a>(env: Env<'a>, context: Handle<ContextRes>, tag: Term<'a>) -> Term<'a> {
    answer(env, tag, encode_unit, |done| context.0.close_then(done))
}
