//! `HexagonTpu.Runtime`: open the backend and system libraries, inspect, close.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;

use rustler::{Binary, Env, NifUnitEnum, ResourceArc, Term};

use crate::error::{Failure, ok_or_error, unit_or_error};
use crate::quote;
use crate::reply::answer;
use crate::resources::{Handle, RuntimeRes};
use crate::terms::RuntimeInfoTerm;

/// `:error | :warn | :info | :verbose | :debug`
#[derive(NifUnitEnum, Clone, Copy)]
pub enum LogLevelArg {
    Error,
    Warn,
    Info,
    Verbose,
    Debug,
}

impl From<LogLevelArg> for qnn::LogLevel {
    fn from(level: LogLevelArg) -> Self {
        match level {
            LogLevelArg::Error => qnn::LogLevel::Error,
            LogLevelArg::Warn => qnn::LogLevel::Warn,
            LogLevelArg::Info => qnn::LogLevel::Info,
            LogLevelArg::Verbose => qnn::LogLevel::Verbose,
            LogLevelArg::Debug => qnn::LogLevel::Debug,
        }
    }
}

/// `{:ok, {runtime_ref, info_map}} | {:error, %HexagonTpu.Error{}}`, directly or (once the
/// runtime's thread has made its handles) by message; see `crate::reply`. `site` is the Elixir
/// caller, for the ledger of live objects.
///
/// `performance` is the runtime's mode and its idle delay in milliseconds (`qnn::perf`).
///
/// The library paths are binaries, any bytes: Linux paths need not be UTF-8. (Elixir has
/// already refused empty paths and paths with a NUL byte.)
#[rustler::nif(schedule = "DirtyIo")]
fn runtime_create<'a>(
    env: Env<'a>,
    backend_lib: Binary<'a>,
    system_lib: Binary<'a>,
    log_level: Option<LogLevelArg>,
    (performance, performance_idle_ms): (crate::perf::PerfModeArg, u64),
    site: String,
    tag: Term<'a>,
) -> Term<'a> {
    let config = qnn::RuntimeConfig {
        backend_lib: path_from_bytes(backend_lib.as_slice()),
        system_lib: path_from_bytes(system_lib.as_slice()),
        log_level: log_level.map(qnn::LogLevel::from),
        performance: qnn::PerfConfig {
            mode: performance.into(),
            idle: std::time::Duration::from_millis(performance_idle_ms),
        },
    };
    answer(env, tag, encode_created, |done| {
        qnn::Runtime::create_then(&config, &qnn::Site::named(site), done)
    })
}

/// A path from the bytes of an Elixir binary, as they are.
pub fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

fn encode_created(env: Env<'_>, result: qnn::Result<Arc<qnn::Runtime>>) -> Term<'_> {
    let result = result.map_err(quote::capped).map(|runtime| {
        let info = RuntimeInfoTerm::from(runtime.info());
        (ResourceArc::new(RuntimeRes(runtime)), info)
    });
    ok_or_error(env, result)
}

/// `{:ok, info_map} | {:error, %HexagonTpu.Error{reason: :closed}}`
#[rustler::nif]
fn runtime_info<'a>(env: Env<'a>, runtime: Handle<RuntimeRes>) -> Term<'a> {
    let result = if runtime.0.is_closed() {
        Err(Failure::Qnn(qnn::Error::Closed { what: "runtime" }))
    } else {
        Ok(RuntimeInfoTerm::from(runtime.0.info()))
    };
    ok_or_error(env, result)
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
    unit_or_error(env, result.map_err(Failure::from))
}
