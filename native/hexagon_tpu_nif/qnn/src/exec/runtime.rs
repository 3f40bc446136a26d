//! `Runtime`: one backend library with its log, backend and device handles.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::base::closable::Closable;
use crate::base::error::Result;
use crate::base::sync::Done;
use crate::base::sync::blocking;
use crate::base::version::Version;
use crate::exec::owner::Owner;
use crate::exec::perf::{PerfMode, PerfState, Voter};
use crate::ffi::loader::{self, BackendLibrary, SystemLibrary};
pub use crate::ffi::log::LogLevel;
use crate::ffi::platform::DevicePlatform;
use crate::model::preflight::RuntimeSide;
use crate::observe::ledger::{Kind, Site};
use crate::observe::trace::{self, Phase};

/// Where the libraries are and how much QNN should log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    pub backend_lib: PathBuf,
    pub system_lib: PathBuf,
    /// rpcmem's library, for contexts with shared buffers
    /// (`libcdsprpc.so` on the device: [`crate::shared::DEFAULT_RPCMEM_LIB`]); opened at the first
    /// load that asks for them, so a missing one is no error here.
    pub rpcmem_lib: PathBuf,
    /// The most verbose level QNN's log callback receives ([`crate::log`]); `None` creates no
    /// QNN log handle at all.
    pub log_level: Option<LogLevel>,
    /// The runtime's performance mode and how long a call's mode outlives the last call
    /// ([`crate::perf`]).
    pub performance: PerfConfig,
}

/// A runtime's performance settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerfConfig {
    /// The mode voted while no call asks for another; `Default` votes nothing.
    pub mode: PerfMode,
    /// How long after the last call a call's own mode gives way to `mode` again.
    pub idle: Duration,
}

impl Default for PerfConfig {
    fn default() -> PerfConfig {
        PerfConfig {
            mode: PerfMode::Default,
            idle: crate::exec::perf::DEFAULT_IDLE,
        }
    }
}

/// What the backend reports about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeInfo {
    pub backend_id: u32,
    pub provider_name: String,
    pub build_id: String,
    pub core_api: Version,
    pub backend_api: Version,
    pub system_api: Version,
    pub backend_lib: PathBuf,
    pub system_lib: PathBuf,
    /// What the device reported about itself (`deviceGetPlatformInfo`), when the backend says.
    pub device: Option<DevicePlatform>,
}

impl From<&RuntimeInfo> for RuntimeSide {
    /// The runtime as the pre-flight verdict sees it.
    fn from(info: &RuntimeInfo) -> Self {
        RuntimeSide::new(
            info.backend_id,
            info.build_id.clone(),
            info.core_api,
            info.backend_api,
            info.device.clone(),
        )
    }
}

/// What contexts share with their runtime. Contexts hold it through an `Arc`; the QNN handles
/// live on the owner thread, which frees them when the last holder is gone, whenever the
/// runtime itself is closed or dropped.
pub(crate) struct RuntimeCore {
    pub backend_lib: Arc<BackendLibrary>,
    pub system_lib: Arc<SystemLibrary>,
    /// Where contexts with shared buffers open rpcmem.
    pub rpcmem_lib: PathBuf,
    pub owner: Owner,
}

impl Drop for RuntimeCore {
    fn drop(&mut self) {
        // The last holder is gone: the owner thread frees the handles (as a job, so the counters
        // see the free pending) and then ends. Never waits here.
        self.owner.run(Box::new(|handles| {
            let _ = handles.free();
        }));
    }
}

/// A QNN backend, ready to load context binaries.
pub struct Runtime {
    info: RuntimeInfo,
    core: Closable<RuntimeCore>,
    /// The runtime's votes: usable while any context holds the handles, closed or not.
    voter: Arc<Voter>,
}

impl Runtime {
    /// Opens the libraries (cached process-wide), negotiates providers and creates the log,
    /// backend and device handles on the runtime's own thread, waiting for it. `site` is its
    /// entry in the [ledger](crate::ledger) (`Site::here()` for the calling code).
    pub fn new(config: &RuntimeConfig, site: &Site) -> Result<Arc<Runtime>> {
        blocking(|done| Self::create_then(config, site, done))
    }

    /// [`Runtime::new`] without waiting for the handles: the libraries are opened here, the
    /// handles created on the runtime's new thread, and `done` gets the runtime there. `site`
    /// is its entry in the [ledger](crate::ledger).
    pub fn create_then(config: &RuntimeConfig, site: &Site, done: Done<Arc<Runtime>>) {
        let _span = trace::span(Phase::RuntimeCreate, &config.backend_lib.to_string_lossy());
        let libraries = loader::backend(&config.backend_lib)
            .and_then(|backend| Ok((backend, loader::system(&config.system_lib)?)));
        let (backend_lib, system_lib) = match libraries {
            Ok(libraries) => libraries,
            Err(error) => return done(Err(error)),
        };
        let lib = Arc::clone(&backend_lib);
        let rpcmem_lib = config.rpcmem_lib.clone();
        let started = Box::new(move |owner: Result<Owner>| {
            done(owner.map(|owner| {
                let info = RuntimeInfo {
                    backend_id: backend_lib.backend_id,
                    provider_name: backend_lib.provider_name.clone(),
                    build_id: backend_lib.build_id(),
                    core_api: backend_lib.core_api,
                    backend_api: backend_lib.api_version(),
                    system_api: system_lib.system_api,
                    backend_lib: backend_lib.path.clone(),
                    system_lib: system_lib.path.clone(),
                    device: owner.platform.clone(),
                };
                let voter = Arc::clone(&owner.voter);
                let core = RuntimeCore {
                    backend_lib,
                    system_lib,
                    rpcmem_lib,
                    owner,
                };
                Arc::new(Runtime {
                    info,
                    core: Closable::new("runtime", core),
                    voter,
                })
            }))
        });
        Owner::spawn(
            lib,
            config.log_level,
            (config.performance.mode, config.performance.idle),
            (Kind::Runtime, site.as_str().to_string()),
            started,
        );
    }

    /// What the backend reported at creation (available after close too).
    pub fn info(&self) -> &RuntimeInfo {
        &self.info
    }

    /// Closes the runtime: no new contexts can be created from it. Its QNN handles are freed
    /// now if no context holds them, or when the last context goes. Closing twice is an error.
    /// Waits for the runtime's thread; see [`Runtime::close_then`].
    pub fn close(&self) -> Result<()> {
        blocking(|done| self.close_then(done))
    }

    /// Closes without waiting. When no context holds the handles they are freed on the owner
    /// thread and `done` gets the result there; otherwise `done` gets `Ok` at once.
    pub fn close_then(&self, done: Done<()>) {
        match self.core.close().map(Arc::try_unwrap) {
            Ok(Ok(core)) => core
                .owner
                .run(Box::new(move |handles| done(handles.free()))),
            // Contexts still hold the handles; the last one frees them.
            Ok(Err(_shared)) => done(Ok(())),
            Err(error) => done(Err(error)),
        }
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    pub(crate) fn core(&self) -> Result<Arc<RuntimeCore>> {
        self.core.get()
    }

    /// Changes the runtime's performance mode and votes it (unless a call's own mode is in
    /// force: then when that gives way). Sends the vote on the calling thread, which must be
    /// allowed to wait for an RPC (not a normal scheduler); a refusal is counted and logged,
    /// never returned. `Err(Closed)` once the runtime is closed.
    pub fn set_performance(&self, mode: PerfMode) -> Result<()> {
        self.core.get()?;
        self.voter.set_mode(mode);
        Ok(())
    }

    /// The performance state: the runtime's mode, the mode voted, the vote in force (its
    /// parameters, for a replay) and whether the backend takes votes. Never waits for a vote
    /// being sent (a short lock): cheap anywhere.
    pub fn performance(&self) -> PerfState {
        self.voter.state()
    }

    /// The runtime's own performance mode (atomics only: cheap anywhere).
    pub fn performance_mode(&self) -> PerfMode {
        self.voter.mode()
    }

    /// Before an execute on this runtime's contexts: the call's mode (`None`: the runtime's).
    /// Cheap (a short lock); `true` when a vote must be sent first with
    /// [`Runtime::performance_settle`]. Pair every call with [`Runtime::performance_leave`].
    pub fn performance_enter(&self, mode: Option<PerfMode>) -> bool {
        self.voter.enter(mode)
    }

    /// Sends the votes wanted (an RPC: not on a normal scheduler). Never waits for another
    /// caller's vote.
    pub fn performance_settle(&self) {
        self.voter.settle();
    }

    /// After the execute that [`Runtime::performance_enter`] announced.
    pub fn performance_leave(&self) {
        self.voter.leave();
    }

    /// Sends the vote in force again, as a recovery after a DSP restart would: `Ok(false)` when
    /// none is in force. Not on a normal scheduler.
    pub fn replay_performance(&self) -> Result<bool> {
        self.voter.replay()
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("backend_lib", &self.info.backend_lib)
            .field("core_api", &self.info.core_api)
            .field("closed", &self.is_closed())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::metadata::BinaryInfo;
    use crate::model::preflight::{Mode, PLATFORM_IS_HARDWARE, check};
    use crate::sys;

    #[test]
    fn the_device_counts_only_where_it_is_hardware() {
        let info = RuntimeInfo {
            backend_id: sys::QNN_BACKEND_ID_HTP,
            provider_name: "HTP_QTI_AISW".into(),
            build_id: "v2.51.0.260929181845".into(),
            core_api: Version::new(2, 40, 0),
            backend_api: Version::new(5, 51, 0),
            system_api: Version::new(1, 15, 0),
            backend_lib: "libQnnHtp.so".into(),
            system_lib: "libQnnSystem.so".into(),
            device: Some(DevicePlatform {
                soc_model: Some(30),
                dsp_arch: Some(68),
                vtcm_size: None,
            }),
        };
        let side = RuntimeSide::from(&info);
        assert_eq!(side.device.is_some(), cfg!(target_arch = "aarch64"));
        let bin = BinaryInfo::for_tests(&info.build_id);
        let verdict = check(&bin, &side, Mode::Strict);
        assert_eq!(verdict.refusals.len(), usize::from(PLATFORM_IS_HARDWARE));
    }
}
