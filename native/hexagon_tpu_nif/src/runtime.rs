//! `HexagonTpu.Runtime`: open the backend and system libraries, inspect, close.

use std::path::PathBuf;
use std::sync::Arc;

use rustler::{Env, NifUnitEnum, ResourceArc, Term};

use crate::error::{Failure, ok_or_error, unit_or_error};
use crate::reply::answer;
use crate::resources::RuntimeRes;
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
#[rustler::nif(schedule = "DirtyIo")]
fn runtime_create<'a>(
    env: Env<'a>,
    backend_lib: String,
    system_lib: String,
    log_level: Option<LogLevelArg>,
    site: String,
    tag: Term<'a>,
) -> Term<'a> {
    let config = qnn::RuntimeConfig {
        backend_lib: PathBuf::from(backend_lib),
        system_lib: PathBuf::from(system_lib),
        log_level: log_level.map(qnn::LogLevel::from),
    };
    answer(env, tag, encode_created, |done| {
        qnn::Runtime::create_then(&config, &site, done)
    })
}

fn encode_created(env: Env<'_>, result: qnn::Result<Arc<qnn::Runtime>>) -> Term<'_> {
    let result = result.map_err(Failure::from).map(|runtime| {
        let info = RuntimeInfoTerm::from(runtime.info());
        (ResourceArc::new(RuntimeRes(runtime)), info)
    });
    ok_or_error(env, result)
}

/// `{:ok, info_map} | {:error, %HexagonTpu.Error{reason: :closed}}`
#[rustler::nif]
fn runtime_info<'a>(env: Env<'a>, runtime: ResourceArc<RuntimeRes>) -> Term<'a> {
    let result = if runtime.0.is_closed() {
        Err(Failure::Qnn(qnn::Error::Closed { what: "runtime" }))
    } else {
        Ok(RuntimeInfoTerm::from(runtime.0.info()))
    };
    ok_or_error(env, result)
}

#[rustler::nif]
fn runtime_closed(runtime: ResourceArc<RuntimeRes>) -> bool {
    runtime.0.is_closed()
}

/// `:ok | {:error, %HexagonTpu.Error{}}`, directly or by message once the runtime's thread has
/// freed the handles. Never waits.
#[rustler::nif]
fn runtime_close<'a>(env: Env<'a>, runtime: ResourceArc<RuntimeRes>, tag: Term<'a>) -> Term<'a> {
    answer(env, tag, encode_unit, |done| runtime.0.close_then(done))
}

/// `:ok` or `{:error, %HexagonTpu.Error{}}`, for `reply::answer`.
pub fn encode_unit(env: Env<'_>, result: qnn::Result<()>) -> Term<'_> {
    unit_or_error(env, result.map_err(Failure::from))
}
