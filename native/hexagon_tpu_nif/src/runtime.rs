//! `HexagonTpu.Runtime`: open the backend and system libraries, inspect, close.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;

use rustler::{Binary, Env, NifMap, NifUnitEnum, ResourceArc, Term};

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

/// How a runtime is created, one map from `HexagonTpu.Runtime`: QNN's log level (`nil`: no
/// log), the runtime's performance mode and its idle delay in milliseconds (`qnn::perf`), and
/// `site`, the Elixir caller, for the ledger of live objects.
#[derive(NifMap)]
pub struct RuntimeArgs {
    log_level: Option<LogLevelArg>,
    performance: crate::perf::PerfModeArg,
    performance_idle: u64,
    /// rpcmem's library, for contexts with shared buffers.
    rpcmem_lib: String,
    site: String,
}

impl RuntimeArgs {
    fn split(self) -> (qnn::Site, Option<qnn::LogLevel>, qnn::PerfConfig, PathBuf) {
        let performance = qnn::PerfConfig {
            mode: self.performance.into(),
            idle: std::time::Duration::from_millis(self.performance_idle),
        };
        let log_level = self.log_level.map(qnn::LogLevel::from);
        let rpcmem_lib = PathBuf::from(self.rpcmem_lib);
        (
            qnn::Site::named(self.site),
            log_level,
            performance,
            rpcmem_lib,
        )
    }
}

/// `{:ok, {runtime_ref, info_map}} | {:error, %HexagonTpu.Error{}}`, directly or (once the
/// runtime's thread has made its handles) by message; see `crate::reply`. `options` as
/// [`RuntimeArgs`].
///
/// The library paths are binaries, any bytes: Linux paths need not be UTF-8. (Elixir has
/// already refused empty paths and paths with a NUL byte.)
#[rustler::nif(schedule = "DirtyIo")]
fn runtime_create<'a>(
    env: Env<'a>,
    backend_lib: Binary<'a>,
    system_lib: Binary<'a>,
    options: RuntimeArgs,
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
