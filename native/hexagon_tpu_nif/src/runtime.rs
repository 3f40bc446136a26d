//! `HexagonTpu.Runtime`: open the backend and system libraries, inspect, close.

use std::path::PathBuf;

use rustler::{Env, NifUnitEnum, ResourceArc, Term};

use crate::error::{Failure, ok_or_error, unit_or_error};
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

/// `{:ok, {runtime_ref, info_map}} | {:error, %HexagonTpu.Error{}}`. `site` is the Elixir
/// caller, for the ledger of live objects.
#[rustler::nif(schedule = "DirtyIo")]
fn runtime_create<'a>(
    env: Env<'a>,
    backend_lib: String,
    system_lib: String,
    log_level: Option<LogLevelArg>,
    site: String,
) -> Term<'a> {
    let config = qnn::RuntimeConfig {
        backend_lib: PathBuf::from(backend_lib),
        system_lib: PathBuf::from(system_lib),
        log_level: log_level.map(qnn::LogLevel::from),
    };
    let result = qnn::Runtime::new_at(&config, &site)
        .map_err(Failure::from)
        .map(|runtime| {
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

/// `:ok | {:error, %HexagonTpu.Error{}}`
#[rustler::nif(schedule = "DirtyIo")]
fn runtime_close<'a>(env: Env<'a>, runtime: ResourceArc<RuntimeRes>) -> Term<'a> {
    unit_or_error(env, runtime.0.close().map_err(Failure::from))
}
