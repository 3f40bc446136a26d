//! `HexagonTpu.Runtime`: open the backend and system libraries, inspect, close.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;

use rustler::{Binary, Encoder, Env, ResourceArc, Term};

use crate::error::{Done, Failure};
use crate::protocol::RuntimeArg;
use crate::quote;
use crate::reply::answer;
use crate::resources::{Handle, RuntimeRes};
use crate::terms::{CreatedTerm, RuntimeInfoTerm};

/// `{:ok, %{runtime: ref, info: info_map}} | {:error, %HexagonTpu.Error{}}`, directly or (once the
/// runtime's thread has made its handles) by message; see `crate::reply`. `options` as
/// [`RuntimeArg`].
///
/// The library paths are binaries, any bytes: Linux paths need not be UTF-8. (Elixir has
/// already refused empty paths and paths with a NUL byte.)
#[rustler::nif(schedule = "DirtyIo")]
fn runtime_create<'a>(
    env: Env<'a>,
    backend_lib: Binary<'a>,
    system_lib: Binary<'a>,
    options: RuntimeArg,
    tag: Term<'a>,
) -> Term<'a> {
    let (site, log_level, performance, rpcmem_lib) = options.split();
    let config = qnn::RuntimeConfig {
        backend_lib: path_from_bytes(backend_lib.as_slice()),
        system_lib: path_from_bytes(system_lib.as_slice()),
        rpcmem_lib,
        log_level,
        performance,
    };
    answer(env, tag, encode_created, |done| {
        qnn::Runtime::create_then(&config, &site, done)
    })
}

/// A path from the bytes of an Elixir binary, as they are.
pub fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

fn encode_created(env: Env<'_>, result: qnn::Result<Arc<qnn::Runtime>>) -> Term<'_> {
    (result.map_err(quote::capped))
        .map(|runtime| CreatedTerm {
            info: RuntimeInfoTerm::from(runtime.info()),
            runtime: ResourceArc::new(RuntimeRes(runtime)),
        })
        .encode(env)
}

/// `{:ok, info_map} | {:error, %HexagonTpu.Error{reason: :closed}}`
#[rustler::nif]
fn runtime_info(runtime: Handle<RuntimeRes>) -> Result<RuntimeInfoTerm, Failure> {
    if runtime.0.is_closed() {
        return Err(Failure::closed("runtime"));
    }
    Ok(RuntimeInfoTerm::from(runtime.0.info()))
}

#[rustler::nif]
fn runtime_closed(runtime: Handle<RuntimeRes>) -> bool {
    runtime.0.is_closed()
}

/// `:ok | {:error, %HexagonTpu.Error{}}`, directly or by message once the runtime's thread has
/// freed the handles. Never waits.
#[rustler::nif]
fn runtime_close<'a>(env: Env<'a>, runtime: Handle<RuntimeRes>, tag: Term<'a>) -> Term<'a> {
    answer(env, tag, encode_unit, |done| runtime.0.close_then(done))
}

/// `:ok` or `{:error, %HexagonTpu.Error{}}`, for `reply::answer`.
pub fn encode_unit(env: Env<'_>, result: qnn::Result<()>) -> Term<'_> {
    Done::<Failure>::from(result).encode(env)
}
