//! The power configs a vote sends (through the perf infrastructure's calls in
//! `ffi::calls::perf`).

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
