//! The backend's perf infrastructure (`deviceGetInfrastructure`) and the power configs a vote sends.

use crate::base::exit;
use crate::ffi::loader::BackendLibrary;
use crate::sys;

/// A `DCVS_V3` power config.
pub(super) fn dcvs_config(
    dcvs_v3: sys::QnnHtpPerfInfrastructure_DcvsV3_t,
) -> sys::QnnHtpPerfInfrastructure_PowerConfig_t {
    sys::QnnHtpPerfInfrastructure_PowerConfig_t {
        option: sys::QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_DCVS_V3,
        config: sys::QnnHtpPerfInfrastructure_PowerConfigUnion_t {
            dcvsV3Config: dcvs_v3,
        },
    }
}

/// An `RPC_POLLING_TIME` power config (µs).
pub(super) fn polling_config(time: u32) -> sys::QnnHtpPerfInfrastructure_PowerConfig_t {
    sys::QnnHtpPerfInfrastructure_PowerConfig_t {
        option: sys::QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_POLLING_TIME,
        config: sys::QnnHtpPerfInfrastructure_PowerConfigUnion_t {
            rpcPollingTimeConfig: time,
        },
    }
}

/// The functions of an HTP backend's perf infrastructure.
#[derive(Clone, Copy)]
pub(super) struct PerfFns {
    pub(super) create: sys::QnnHtpPerfInfrastructure_CreatePowerConfigIdFn_t,
    pub(super) destroy: sys::QnnHtpPerfInfrastructure_DestroyPowerConfigIdFn_t,
    pub(super) set_power_config: sys::QnnHtpPerfInfrastructure_SetPowerConfigFn_t,
}

/// `deviceGetInfrastructure`'s perf functions, or why there are none.
pub(super) fn infrastructure(lib: &BackendLibrary) -> std::result::Result<PerfFns, String> {
    let get = lib
        .fns
        .device_get_infrastructure
        .ok_or("the backend has no deviceGetInfrastructure")?;
    let _in_qnn = exit::enter().map_err(|e| e.to_string())?;
    let mut infra: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: the out-pointer is valid for a write of one pointer.
    let status = sys::Status(unsafe { get(&mut infra) });
    lib.check("deviceGetInfrastructure", status)
        .map_err(|e| e.to_string())?;
    if infra.is_null() {
        return Err("deviceGetInfrastructure answered NULL".into());
    }
    // SAFETY: an HTP backend's infrastructure is a `QnnHtpDevice_Infrastructure_t` it owns for
    // its whole life (QnnHtpDevice.h); it is only read, by value.
    let infra = unsafe { infra.cast::<sys::QnnHtpDevice_Infrastructure_t>().read() };
    if infra.infraType != sys::QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF {
        return Err(format!(
            "the infrastructure's type is {}, not the HTP perf infrastructure",
            infra.infraType
        ));
    }
    let perf = infra.perfInfra;
    match (
        perf.createPowerConfigId,
        perf.destroyPowerConfigId,
        perf.setPowerConfig,
    ) {
        (Some(create), Some(destroy), Some(set_power_config)) => Ok(PerfFns {
            create,
            destroy,
            set_power_config,
        }),
        _ => Err("the perf infrastructure lacks a power config function".into()),
    }
}
