//! The C side: QNN entry points, the handle registry, and the `QnnSim_*` test exports.
//!
//! Every export runs inside `catch_unwind` (a panic becomes `QNN_COMMON_ERROR_GENERAL`), and
//! every handle is an id looked up in a registry, so stale, double-freed or wrong-kind handles
//! get the matching `*_INVALID_HANDLE` code instead of undefined behaviour.

#![allow(non_snake_case)]

pub mod core;
pub mod execute;
pub mod execute_async;
pub mod mem;
mod metadata;
pub mod perf;
pub mod profile;
pub mod providers;
pub mod ssr;
pub mod state;
pub mod system;

use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

use state::*;

/// Sets a library-wide knob. Returns 0 on success, 1 for an unknown key, 2 for a bad value,
/// 3 for a NULL or non-UTF-8 argument. Keys are listed in the crate README.
///
/// # Safety
/// `key` and `value` must be NULL or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnSim_configure(key: *const c_char, value: *const c_char) -> i32 {
    catch_unwind(AssertUnwindSafe(|| {
        if key.is_null() {
            return CONFIGURE_BAD_ARGUMENT;
        }
        // SAFETY: non-NULL; the caller passes NUL-terminated strings.
        let key = unsafe { CStr::from_ptr(key) };
        let value = if value.is_null() {
            c""
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(value) }
        };
        match (key.to_str(), value.to_str()) {
            (Ok(k), Ok(v)) => configure(k, v),
            _ => CONFIGURE_BAD_ARGUMENT,
        }
    }))
    .unwrap_or(CONFIGURE_BAD_ARGUMENT)
}

/// Applies one knob (the keys are in the crate README) under the knobs' lock: each module
/// applies its own (`state`'s, `providers`' `null_entries`, `ssr`'s plan), and `reset` resets
/// them all. Composed here, above the modules, so that `state`, the floor, calls none of them.
fn configure(key: &str, value: &str) -> i32 {
    let mut k = lock(&KNOBS);
    let ok = match key {
        "reset" => {
            state::reset(&mut k);
            execute_async::reset();
            perf::reset();
            ssr::reset();
            mem::reset();
            Some(true)
        }
        "null_entries" => Some(providers::set_null_entries(&mut k, value)),
        _ => state::configure(&mut k, key, value).or_else(|| ssr::configure(key, value)),
    };
    match ok {
        None => CONFIGURE_UNKNOWN_KEY,
        Some(true) => {
            KNOBS_GENERATION.fetch_add(1, Ordering::SeqCst);
            CONFIGURE_OK
        }
        Some(false) => CONFIGURE_BAD_VALUE,
    }
}

fn counter(f: impl FnOnce() -> u64) -> u64 {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(u64::MAX)
}

/// Log, backend, device, context and System-context handles currently alive, platform infos
/// (`deviceGetPlatformInfo`) not yet freed, and asynchronous worker threads not yet ended.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_liveHandles() -> u64 {
    counter(|| {
        registry().live_handles()
            + self::core::platform_infos_out()
            + perf::live_power_config_ids()
            + execute_async::ASYNC_WORKERS.load(Ordering::SeqCst)
            + mem::live()
    })
}

/// `QnnMem_register` handles made, whatever became of them.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_memRegistrations() -> u64 {
    counter(|| mem::REGISTRATIONS.load(Ordering::SeqCst))
}

/// Registrations ended by `QnnMem_deRegister`.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_memDeregistrations() -> u64 {
    counter(|| mem::DEREGISTRATIONS.load(Ordering::SeqCst))
}

/// Registrations alive now (also in `QnnSim_liveHandles`).
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_memLiveRegistrations() -> u64 {
    counter(mem::live)
}

/// Registrations ended by freeing their context (`contextFree` deregisters them).
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_memFreedWithContext() -> u64 {
    counter(|| mem::FREED_WITH_CONTEXT.load(Ordering::SeqCst))
}

/// Executes that ran with at least one `QNN_TENSORMEMTYPE_MEMHANDLE` tensor.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_memHandleExecutes() -> u64 {
    counter(|| mem::MEMHANDLE_EXECUTES.load(Ordering::SeqCst))
}

/// Executes refused because a MEMHANDLE tensor named no live registration of its context.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_memStaleUses() -> u64 {
    counter(|| mem::STALE_USES.load(Ordering::SeqCst))
}

/// `QnnMem_register` calls refused, whatever the code.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_memRegisterRefusals() -> u64 {
    counter(|| mem::REGISTER_REFUSALS.load(Ordering::SeqCst))
}

/// Asynchronous executes accepted and not yet answered (queued, or running on a worker), all
/// contexts.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_asyncInFlight() -> u64 {
    counter(|| execute_async::ASYNC_IN_FLIGHT.load(Ordering::SeqCst))
}

/// The most asynchronous executes ever in flight at once, all contexts.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_peakAsyncInFlight() -> u64 {
    counter(|| execute_async::ASYNC_PEAK_IN_FLIGHT.load(Ordering::SeqCst))
}

/// The priority (`Qnn_Priority_t`) the latest context was created with, `u64::MAX` when it was
/// given none.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_lastContextPriority() -> u64 {
    counter(|| self::core::LAST_CONTEXT_PRIORITY.load(Ordering::SeqCst))
}

/// Power config ids created (`createPowerConfigId`) and not destroyed.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_livePowerConfigIds() -> u64 {
    counter(perf::live_power_config_ids)
}

/// `setPowerConfig` calls on a live power config id, accepted or refused.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_setPowerConfigCalls() -> u64 {
    counter(|| perf::SET_POWER_CONFIG_CALLS.load(Ordering::SeqCst))
}

/// What the last accepted vote carried: writes its DCVS v3 config into `dcvs` (16 `u32`s, in
/// the struct's field order) and returns a bit set: 1 a DCVS v3 config was in it, 2 an RPC
/// polling time (written to `polling`), 4 an RPC control latency (written to `latency`).
///
/// # Safety
/// `dcvs` must be valid for 16 `u32` writes, `polling` and `latency` for one each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnSim_lastPowerConfig(
    dcvs: *mut u32,
    polling: *mut u32,
    latency: *mut u32,
) -> u32 {
    catch_unwind(AssertUnwindSafe(|| {
        let vote = *lock(&perf::LAST_VOTE);
        let mut present = 0;
        if let Some(d) = vote.dcvs_v3 {
            present |= 1;
            let fields = [
                d.contextId,
                d.setDcvsEnable,
                d.dcvsEnable,
                d.powerMode,
                d.setSleepLatency,
                d.sleepLatency,
                d.setSleepDisable,
                d.sleepDisable,
                d.setBusParams,
                d.busVoltageCornerMin,
                d.busVoltageCornerTarget,
                d.busVoltageCornerMax,
                d.setCoreParams,
                d.coreVoltageCornerMin,
                d.coreVoltageCornerTarget,
                d.coreVoltageCornerMax,
            ];
            for (k, value) in fields.into_iter().enumerate() {
                // SAFETY: the caller gives room for 16 values.
                unsafe { dcvs.add(k).write(value) };
            }
        }
        if let Some(time) = vote.rpc_polling_time {
            present |= 2;
            // SAFETY: the caller gives room for one value.
            unsafe { polling.write(time) };
        }
        if let Some(value) = vote.rpc_control_latency {
            present |= 4;
            // SAFETY: as above.
            unsafe { latency.write(value) };
        }
        present
    }))
    .unwrap_or(0)
}

/// Notify callbacks called by asynchronous workers, whatever the status.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_asyncNotifications() -> u64 {
    counter(|| execute_async::ASYNC_NOTIFICATIONS.load(Ordering::SeqCst))
}

/// Times `graphExecute` was entered on a graph while another execute on the same graph
/// handle was running (each such call returned `QNN_GRAPH_ERROR_INVALID_ARGUMENT`).
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_executeOverlaps() -> u64 {
    counter(|| EXECUTE_OVERLAPS.load(Ordering::SeqCst))
}

/// Largest number of executes in flight at once, across all graphs.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_peakConcurrentExecutes() -> u64 {
    counter(|| PEAK_CONCURRENT_EXECUTES.load(Ordering::SeqCst))
}

/// `graphExecute` and `graphExecuteAsync` calls on a valid graph handle (successful or not).
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_executeCount() -> u64 {
    counter(|| EXECUTE_COUNT.load(Ordering::SeqCst))
}

/// `QnnProfile_create` calls that made a handle.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_profilesCreated() -> u64 {
    counter(|| profile::PROFILES_CREATED.load(Ordering::SeqCst))
}

/// Profile handles created and not yet freed.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_profilesLive() -> u64 {
    counter(|| profile::PROFILES_LIVE.load(Ordering::SeqCst))
}

/// Frees refused because of the caller's ordering (a log before its backend, a backend or
/// device before its contexts, a context during an execute); each returned 1005.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_lifetimeViolations() -> u64 {
    counter(|| LIFETIME_VIOLATIONS.load(Ordering::SeqCst))
}

/// DSP restarts so far (`ssr_after_executes`; see `ssr`).
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_ssrRestarts() -> u64 {
    counter(|| ssr::RESTARTS.load(Ordering::SeqCst))
}

/// Contexts a restart killed that are not freed yet.
#[unsafe(no_mangle)]
pub extern "C" fn QnnSim_ssrDeadContexts() -> u64 {
    counter(ssr::dead_live)
}
