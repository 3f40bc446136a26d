//! `HexagonTpu.Context`: load a context binary (file or bytes), list its graphs, close.
//!
//! The file is opened and checked here (the caller's own I/O, on a dirty IO scheduler); the QNN
//! context is created on the runtime's thread, and the answer comes back by message.

use std::sync::Arc;

use rustler::{Binary, Encoder, Env, Term};

use qnn::model_file::DEFAULT_MAX_BYTES;

use crate::error::Failure;
use crate::protocol::LoadArg;
use crate::quote;
use crate::reply::answer;
use crate::resources::{ContextRes, Handle, RuntimeRes};
use crate::runtime::{encode_unit, path_from_bytes};
use crate::terms::{BinaryInfoTerm, LoadedTerm};

fn encode_loaded(env: Env<'_>, result: qnn::Result<Arc<qnn::Context>>) -> Term<'_> {
    // The terms borrow the context's metadata: encoded while it is at hand.
    (result.map_err(quote::capped))
        .map(|context| LoadedTerm::new(env, &context).encode(env))
        .encode(env)
}

/// `{:ok, %{context, graphs, warnings, queue, buffers}} | {:error, %HexagonTpu.Error{}}`
/// ([`LoadedTerm`]), directly or by message. Only a regular file of at most `max_bytes` (`nil`:
/// `qnn`'s default, 2 GiB) is read. `path` is a binary, any bytes (Linux paths need not be
/// UTF-8).
#[rustler::nif(schedule = "DirtyIo")]
fn context_from_file<'a>(
    env: Env<'a>,
    runtime: Handle<RuntimeRes>,
    path: Binary<'a>,
    max_bytes: Option<u64>,
    load: LoadArg,
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
    load: LoadArg,
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
) -> Result<Term<'a>, Failure> {
    let system_lib = path_from_bytes(system_lib.as_slice());
    let path = path_from_bytes(path.as_slice());
    qnn::model_file::read(&path, max_bytes.unwrap_or(DEFAULT_MAX_BYTES))
        .and_then(|bytes| qnn::inspect::binary_info(&system_lib, &bytes))
        .map_err(quote::capped)
        .map(|info| BinaryInfoTerm::new(env, &info).encode(env))
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
