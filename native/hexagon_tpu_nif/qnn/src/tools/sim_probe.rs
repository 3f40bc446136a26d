//! Test support for `qnn_sim`, the project's simulated QNN backend: reads the counters it
//! exports and sets its knobs (`QnnSim_*` symbols, which Qualcomm's libraries do not have); and
//! this crate's one fault of its own, a panic inside an execute. Only with the cargo feature
//! `test-support`, which releases do not enable: it opens whatever path it is given.
//!
//! These calls open the library by path; when the runtime already opened the same path, the
//! dynamic loader hands back that same instance, so the numbers describe the handles the runtime
//! created. Like the runtime's own loader, this keeps every library it opened loaded: closing
//! it would unload the backend (and forget its knobs) before the runtime opens it. Nothing here
//! is used on a device.

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use crate::base::error::{Error, LibraryRole, Result};
use crate::base::sync::lock;

static OPENED: LazyLock<Mutex<HashMap<PathBuf, Arc<Library>>>> = LazyLock::new(Default::default);

fn open(path: &Path) -> Result<Arc<Library>> {
    let mut opened = lock(&OPENED);
    if let Some(library) = opened.get(path) {
        return Ok(Arc::clone(library));
    }
    // SAFETY: opening qnn_sim runs no initializers beyond Rust's own statics.
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
        Error::LibraryNotFound {
            role: LibraryRole::Backend,
            tried: vec![(path.to_path_buf(), crate::ffi::loader::describe(&e))],
        }
    })?;
    let library = Arc::new(library);
    opened.insert(path.to_path_buf(), Arc::clone(&library));
    Ok(library)
}

fn read_counter(path: &Path, symbol: &'static str) -> Result<u64> {
    let library = open(path)?;
    let name = CString::new(symbol).expect("symbol names have no NUL");
    // SAFETY: qnn_sim exports these counters as `extern "C" fn() -> u64`.
    let getter = unsafe { library.get::<unsafe extern "C" fn() -> u64>(name.as_bytes_with_nul()) }
        .map_err(|e| Error::MissingSymbol {
            path: path.to_path_buf(),
            symbol,
            detail: crate::ffi::loader::describe(&e),
        })?;
    // SAFETY: the function takes no arguments and only reads atomics.
    Ok(unsafe { getter() })
}

/// QNN handles (log, backend, device, context, System context) qnn_sim has alive.
pub fn live_handles(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_liveHandles")
}

/// Profile handles qnn_sim has created (`QnnProfile_create` calls that succeeded).
pub fn profiles_created(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_profilesCreated")
}

/// Profile handles qnn_sim has alive (created and not yet freed).
pub fn profiles_live(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_profilesLive")
}

/// Times a `graphExecute` started on a graph while another was running on the same graph.
pub fn execute_overlaps(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_executeOverlaps")
}

/// The most executes qnn_sim has seen in flight at once, across graphs.
pub fn peak_concurrent_executes(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_peakConcurrentExecutes")
}

/// `graphExecute` and `graphExecuteAsync` calls that reached a valid graph (counted on entry,
/// failures included).
pub fn execute_count(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_executeCount")
}

/// Asynchronous executes (`graphExecuteAsync`) qnn_sim has accepted and not yet answered.
pub fn async_in_flight(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_asyncInFlight")
}

/// The most asynchronous executes qnn_sim has had in flight at once.
pub fn peak_async_in_flight(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_peakAsyncInFlight")
}

/// Notify callbacks qnn_sim's asynchronous workers have called.
pub fn async_notifications(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_asyncNotifications")
}

/// qnn_sim's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimCounters {
    pub live_handles: u64,
    pub execute_overlaps: u64,
    pub peak_concurrent_executes: u64,
    pub execute_count: u64,
    /// The `Qnn_Priority_t` the latest context was created with; `None` when it was given none.
    pub last_context_priority: Option<u64>,
    /// Power config ids created and not destroyed (also in `live_handles`).
    pub live_power_config_ids: u64,
    /// `setPowerConfig` calls on a live id, accepted or refused.
    pub set_power_config_calls: u64,
    /// What the last accepted vote carried.
    pub last_power_config: LastPowerConfig,
    pub profiles_created: u64,
    pub profiles_live: u64,
    /// Asynchronous executes accepted and not yet notified, and notifications sent.
    pub async_in_flight: u64,
    /// The most asynchronous executes in flight at once ([`peak_async_in_flight`]).
    pub peak_async_in_flight: u64,
    pub async_notifications: u64,
    /// Simulated DSP restarts, and the contexts they killed that are not freed yet.
    pub ssr_restarts: u64,
    pub ssr_dead_contexts: u64,
    /// QnnMem: registrations made and live, executes with a MEMHANDLE tensor, executes refused
    /// for a handle that named no live registration, and `QnnMem_register` calls refused.
    pub mem_registrations: u64,
    pub mem_live_registrations: u64,
    pub mem_handle_executes: u64,
    pub mem_stale_uses: u64,
    pub mem_register_refusals: u64,
}

/// The options of qnn_sim's last accepted `setPowerConfig`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LastPowerConfig {
    pub dcvs_v3: Option<crate::sys::QnnHtpPerfInfrastructure_DcvsV3_t>,
    pub rpc_polling_time: Option<u32>,
    pub rpc_control_latency: Option<u32>,
}

/// Reads `QnnSim_lastPowerConfig`.
fn last_power_config(path: &Path) -> Result<LastPowerConfig> {
    let library = open(path)?;
    type Getter = unsafe extern "C" fn(*mut u32, *mut u32, *mut u32) -> u32;
    // SAFETY: qnn_sim exports `QnnSim_lastPowerConfig` with this signature.
    let getter = unsafe { library.get::<Getter>(b"QnnSim_lastPowerConfig\0") }.map_err(|e| {
        Error::MissingSymbol {
            path: path.to_path_buf(),
            symbol: "QnnSim_lastPowerConfig",
            detail: crate::ffi::loader::describe(&e),
        }
    })?;
    let mut d = [0u32; 16];
    let (mut polling, mut latency) = (0u32, 0u32);
    // SAFETY: room for 16 values and one each, as the export requires.
    let present = unsafe { getter(d.as_mut_ptr(), &mut polling, &mut latency) };
    let dcvs_v3 = crate::sys::QnnHtpPerfInfrastructure_DcvsV3_t {
        contextId: d[0],
        setDcvsEnable: d[1],
        dcvsEnable: d[2],
        powerMode: d[3],
        setSleepLatency: d[4],
        sleepLatency: d[5],
        setSleepDisable: d[6],
        sleepDisable: d[7],
        setBusParams: d[8],
        busVoltageCornerMin: d[9],
        busVoltageCornerTarget: d[10],
        busVoltageCornerMax: d[11],
        setCoreParams: d[12],
        coreVoltageCornerMin: d[13],
        coreVoltageCornerTarget: d[14],
        coreVoltageCornerMax: d[15],
    };
    Ok(LastPowerConfig {
        dcvs_v3: (present & 1 != 0).then_some(dcvs_v3),
        rpc_polling_time: (present & 2 != 0).then_some(polling),
        rpc_control_latency: (present & 4 != 0).then_some(latency),
    })
}

/// Reads every counter qnn_sim exports.
pub fn counters(lib_path: &Path) -> Result<SimCounters> {
    Ok(SimCounters {
        live_handles: live_handles(lib_path)?,
        execute_overlaps: execute_overlaps(lib_path)?,
        peak_concurrent_executes: peak_concurrent_executes(lib_path)?,
        execute_count: execute_count(lib_path)?,
        last_context_priority: Some(read_counter(lib_path, "QnnSim_lastContextPriority")?)
            .filter(|&p| p != u64::MAX),
        live_power_config_ids: read_counter(lib_path, "QnnSim_livePowerConfigIds")?,
        set_power_config_calls: read_counter(lib_path, "QnnSim_setPowerConfigCalls")?,
        last_power_config: last_power_config(lib_path)?,
        profiles_created: profiles_created(lib_path)?,
        profiles_live: profiles_live(lib_path)?,
        async_in_flight: async_in_flight(lib_path)?,
        peak_async_in_flight: peak_async_in_flight(lib_path)?,
        async_notifications: async_notifications(lib_path)?,
        ssr_restarts: ssr_restarts(lib_path)?,
        ssr_dead_contexts: ssr_dead_contexts(lib_path)?,
        mem_registrations: read_counter(lib_path, "QnnSim_memRegistrations")?,
        mem_live_registrations: read_counter(lib_path, "QnnSim_memLiveRegistrations")?,
        mem_handle_executes: read_counter(lib_path, "QnnSim_memHandleExecutes")?,
        mem_stale_uses: read_counter(lib_path, "QnnSim_memStaleUses")?,
        mem_register_refusals: read_counter(lib_path, "QnnSim_memRegisterRefusals")?,
    })
}

/// Sets one of qnn_sim's process-wide knobs (`QnnSim_configure(key, value)`).
pub fn configure(lib_path: &Path, key: &str, value: &str) -> Result<()> {
    let library = open(lib_path)?;
    let invalid = |what: &str| Error::invalid_input(format!("{what} contains a NUL byte"));
    let key_c = CString::new(key).map_err(|_| invalid("the key"))?;
    let value_c = CString::new(value).map_err(|_| invalid("the value"))?;
    // SAFETY: qnn_sim exports `QnnSim_configure(const char*, const char*) -> int32_t`.
    let configure = unsafe {
        library
            .get::<unsafe extern "C" fn(*const std::ffi::c_char, *const std::ffi::c_char) -> i32>(
                b"QnnSim_configure\0",
            )
    }
    .map_err(|e| Error::MissingSymbol {
        path: lib_path.to_path_buf(),
        symbol: "QnnSim_configure",
        detail: crate::ffi::loader::describe(&e),
    })?;
    // SAFETY: both strings are NUL-terminated and outlive the call.
    match unsafe { configure(key_c.as_ptr(), value_c.as_ptr()) } {
        0 => Ok(()),
        code => Err(Error::invalid_input(format!(
            "qnn_sim rejected {key}={value:?} (code {code})"
        ))),
    }
}

/// Makes the next `count` executes, on any graph, panic inside this crate right before they
/// would call `graphExecute`: proves that a panic answers its caller and leaves the graph usable.
pub fn panic_in_next_executes(count: u64) {
    crate::observe::hooks::arm_execute_panics(count);
}

/// DSP restarts qnn_sim has simulated (its `ssr_after_executes` knob).
pub fn ssr_restarts(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_ssrRestarts")
}

/// Contexts a simulated restart killed that are not freed yet.
pub fn ssr_dead_contexts(lib_path: &Path) -> Result<u64> {
    read_counter(lib_path, "QnnSim_ssrDeadContexts")
}
