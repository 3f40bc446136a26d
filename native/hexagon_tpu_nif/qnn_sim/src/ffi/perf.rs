//! The HTP perf infrastructure: `QnnDevice_getInfrastructure` and its power config functions.
//! Every vote is recorded (the count, and each option's values from the last vote), for the
//! tests; the `refuse_power_config` knob makes `setPowerConfig` fail.

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use qnn_sys::*;

use super::state::*;

/// The infrastructure object handed out: one for the library's life, as the HTP's.
struct Infrastructure(QnnHtpDevice_Infrastructure_t);

// SAFETY: function pointers only, never written after creation.
unsafe impl Sync for Infrastructure {}

static INFRASTRUCTURE: Infrastructure = Infrastructure(QnnHtpDevice_Infrastructure_t {
    infraType: QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF,
    perfInfra: QnnHtpDevice_PerfInfrastructure_t {
        createPowerConfigId: Some(create_power_config_id),
        destroyPowerConfigId: Some(destroy_power_config_id),
        setPowerConfig: Some(set_power_config),
        setMemoryConfig: Some(set_memory_config),
    },
});

/// Power config ids created and not destroyed (they count as live handles).
static LIVE_IDS: LazyLock<Mutex<HashSet<u32>>> = LazyLock::new(Default::default);
static NEXT_ID: AtomicU32 = AtomicU32::new(1);
/// `setPowerConfig` calls that reached a live id, accepted or refused.
pub static SET_POWER_CONFIG_CALLS: AtomicU64 = AtomicU64::new(0);

/// What the last accepted vote carried, per option.
#[derive(Clone, Copy, Default)]
pub struct LastVote {
    pub dcvs_v3: Option<QnnHtpPerfInfrastructure_DcvsV3_t>,
    pub rpc_polling_time: Option<u32>,
    pub rpc_control_latency: Option<u32>,
    /// The id the vote was for.
    pub id: u32,
}

pub static LAST_VOTE: LazyLock<Mutex<LastVote>> = LazyLock::new(Default::default);

pub fn live_power_config_ids() -> u64 {
    lock(&LIVE_IDS).len() as u64
}

/// Forgets the votes recorded (the `reset` knob).
pub fn reset() {
    SET_POWER_CONFIG_CALLS.store(0, Ordering::SeqCst);
    *lock(&LAST_VOTE) = LastVote::default();
}

/// `QnnDevice_getInfrastructure`: the HTP perf infrastructure.
///
/// # Safety
/// `out` must be NULL or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnDevice_getInfrastructure(out: *mut *mut c_void) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: checked non-NULL; the caller's out-parameter. The object is only read.
        unsafe { out.write((&raw const INFRASTRUCTURE.0).cast_mut().cast()) };
        0
    })
}

unsafe extern "C" fn create_power_config_id(
    device_id: u32,
    core_id: u32,
    out: *mut u32,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() || device_id != 0 || core_id != 0 {
            return err(QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT);
        }
        let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
        lock(&LIVE_IDS).insert(id);
        // SAFETY: checked non-NULL; the caller's out-parameter.
        unsafe { out.write(id) };
        0
    })
}

unsafe extern "C" fn destroy_power_config_id(id: u32) -> Qnn_ErrorHandle_t {
    guard(|| {
        if lock(&LIVE_IDS).remove(&id) {
            0
        } else {
            err(QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT)
        }
    })
}

/// Checks and records a vote: a live id, known options, a DCVS v3 config whose `contextId` is
/// the id (as ORT fills it), a polling time within the headers' maximum. The
/// `refuse_power_config` knob's code answers a valid vote.
unsafe extern "C" fn set_power_config(
    id: u32,
    config: *const *const QnnHtpPerfInfrastructure_PowerConfig_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if !lock(&LIVE_IDS).contains(&id) || config.is_null() {
            return err(QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT);
        }
        SET_POWER_CONFIG_CALLS.fetch_add(1, Ordering::SeqCst);
        let mut vote = LastVote {
            id,
            ..LastVote::default()
        };
        for k in 0..64 {
            // SAFETY: a NULL-terminated array of readable configs (the caller's contract).
            let item = unsafe { *config.add(k) };
            if item.is_null() {
                break;
            }
            // SAFETY: a non-NULL entry points to a readable config.
            let item = unsafe { *item };
            // Each union read below: `option` says which member the caller wrote; all are plain
            // integers, so any bytes are a valid value.
            match item.option {
                QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_DCVS_V3 => {
                    // SAFETY: see above.
                    let dcvs = unsafe { item.config.dcvsV3Config };
                    if dcvs.contextId != id {
                        return err(QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT);
                    }
                    vote.dcvs_v3 = Some(dcvs);
                }
                QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_POLLING_TIME => {
                    // SAFETY: see above.
                    let time = unsafe { item.config.rpcPollingTimeConfig };
                    if time > QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIG_MAX_RPC_POLLING_TIME {
                        return err(QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT);
                    }
                    vote.rpc_polling_time = Some(time);
                }
                QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_CONTROL_LATENCY => {
                    // SAFETY: see above.
                    let latency = unsafe { item.config.rpcControlLatencyConfig };
                    vote.rpc_control_latency = Some(latency);
                }
                _ => return err(QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED_CONFIG),
            }
        }
        if let Some(code) = knobs().refuse_power_config {
            return err(code);
        }
        *lock(&LAST_VOTE) = vote;
        0
    })
}

unsafe extern "C" fn set_memory_config(
    _device_id: u32,
    _core_id: u32,
    _config: *const *const QnnHtpPerfInfrastructure_MemoryConfig_t,
) -> Qnn_ErrorHandle_t {
    err(QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED)
}
