//! `HexagonTpu.Context`: load a context binary (file or bytes), list its graphs, close.

use std::path::Path;

use rustler::{Binary, Env, ResourceArc, Term};

use crate::error::{Failure, ok_or_error, unit_or_error};
use crate::resources::{ContextRes, RuntimeRes};
use crate::terms::GraphInfoTerm;

type Loaded = (ResourceArc<ContextRes>, Vec<GraphInfoTerm>);

fn loaded(env: Env, context: std::sync::Arc<qnn::Context>) -> Loaded {
    let graphs = context
        .graphs()
        .iter()
        .map(|g| GraphInfoTerm::new(env, g))
        .collect();
    (ResourceArc::new(ContextRes(context)), graphs)
}

/// `{:ok, {context_ref, [graph_info]}} | {:error, %HexagonTpu.Error{}}`. `site` is the Elixir
/// caller, for the ledger of live objects.
#[rustler::nif(schedule = "DirtyIo")]
fn context_from_file<'a>(
    env: Env<'a>,
    runtime: ResourceArc<RuntimeRes>,
    path: String,
    site: String,
) -> Term<'a> {
    let result = qnn::Context::from_file_at(&runtime.0, Path::new(&path), &site)
        .map_err(Failure::from)
        .map(|context| loaded(env, context));
    ok_or_error(env, result)
}

/// Same as `context_from_file`, from a binary already in memory. The bytes are read in place.
#[rustler::nif(schedule = "DirtyIo")]
fn context_from_binary<'a>(
    env: Env<'a>,
    runtime: ResourceArc<RuntimeRes>,
    bytes: Binary<'a>,
    site: String,
) -> Term<'a> {
    let result = qnn::Context::from_bytes_at(&runtime.0, bytes.as_slice(), &site)
        .map_err(Failure::from)
        .map(|context| loaded(env, context));
    ok_or_error(env, result)
}

#[rustler::nif]
fn context_closed(context: ResourceArc<ContextRes>) -> bool {
    context.0.is_closed()
}

/// Waits for running executes on the context's graphs, then frees it.
#[rustler::nif(schedule = "DirtyIo")]
fn context_close<'a>(env: Env<'a>, context: ResourceArc<ContextRes>) -> Term<'a> {
    unit_or_error(env, context.0.close().map_err(Failure::from))
}
