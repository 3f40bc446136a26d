//! The HTP performance infrastructure: `QnnDevice_getInfrastructure`'s answer on an HTP backend
//! (HTP/QnnHtpDevice.h) and its power configs (HTP/QnnHtpPerfInfrastructure.h).

use std::ffi::c_void;

use super::Qnn_ErrorHandle_t;

/// `QnnDevice_getInfrastructure`. C declares the parameter `const QnnDevice_Infrastructure_t*`
/// (a pointer to a `struct _QnnDevice_Infrastructure_t*`), which the library writes through:
/// it is the out-pointer for the backend's infrastructure object, on an HTP backend a
/// [`QnnHtpDevice_Infrastructure_t`] the library owns for its whole life.
pub type QnnDevice_GetInfrastructureFn =
    unsafe extern "C" fn(infrastructure: *mut *mut c_void) -> Qnn_ErrorHandle_t;

/// `QnnHtpPerfInfrastructure_CreatePowerConfigIdFn_t`.
pub type QnnHtpPerfInfrastructure_CreatePowerConfigIdFn_t =
    unsafe extern "C" fn(
        device_id: u32,
        core_id: u32,
        power_config_id: *mut u32,
    ) -> Qnn_ErrorHandle_t;
/// `QnnHtpPerfInfrastructure_DestroyPowerConfigIdFn_t`.
pub type QnnHtpPerfInfrastructure_DestroyPowerConfigIdFn_t =
    unsafe extern "C" fn(power_config_id: u32) -> Qnn_ErrorHandle_t;
/// `QnnHtpPerfInfrastructure_SetPowerConfigFn_t`: `config` is a NULL-terminated array.
pub type QnnHtpPerfInfrastructure_SetPowerConfigFn_t = unsafe extern "C" fn(
    power_config_id: u32,
    config: *const *const QnnHtpPerfInfrastructure_PowerConfig_t,
) -> Qnn_ErrorHandle_t;
/// `QnnHtpPerfInfrastructure_SetMemoryConfigFn_t`: `config` is a NULL-terminated array.
pub type QnnHtpPerfInfrastructure_SetMemoryConfigFn_t = unsafe extern "C" fn(
    device_id: u32,
    core_id: u32,
    config: *const *const QnnHtpPerfInfrastructure_MemoryConfig_t,
) -> Qnn_ErrorHandle_t;

/// `QnnHtpDevice_PerfInfrastructure_t`: the perf functions of an HTP backend.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnHtpDevice_PerfInfrastructure_t {
    pub createPowerConfigId: Option<QnnHtpPerfInfrastructure_CreatePowerConfigIdFn_t>,
    pub destroyPowerConfigId: Option<QnnHtpPerfInfrastructure_DestroyPowerConfigIdFn_t>,
    pub setPowerConfig: Option<QnnHtpPerfInfrastructure_SetPowerConfigFn_t>,
    pub setMemoryConfig: Option<QnnHtpPerfInfrastructure_SetMemoryConfigFn_t>,
}

/// `QnnHtpDevice_Infrastructure_t` (C: `struct _QnnDevice_Infrastructure_t`). C: `union {
/// QnnHtpDevice_PerfInfrastructure_t perfInfra; }`, its only member held directly.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnHtpDevice_Infrastructure_t {
    /// `QnnHtpDevice_InfrastructureType_t`.
    pub infraType: u32,
    pub perfInfra: QnnHtpDevice_PerfInfrastructure_t,
}

/// `QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF`.
pub const QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF: u32 = 0;

/// `QnnHtpPerfInfrastructure_DcvsV3_t`: bus and core voltage corners chosen separately. Every
/// `set*` field says whether the fields after it are to be considered (non-zero) or not.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QnnHtpPerfInfrastructure_DcvsV3_t {
    /// The power config id (ORT passes it here too).
    pub contextId: u32,
    pub setDcvsEnable: u32,
    pub dcvsEnable: u32,
    /// `QnnHtpPerfInfrastructure_PowerMode_t`.
    pub powerMode: u32,
    pub setSleepLatency: u32,
    /// Microseconds.
    pub sleepLatency: u32,
    pub setSleepDisable: u32,
    pub sleepDisable: u32,
    pub setBusParams: u32,
    /// `QnnHtpPerfInfrastructure_VoltageCorner_t`, as the three core corners.
    pub busVoltageCornerMin: u32,
    pub busVoltageCornerTarget: u32,
    pub busVoltageCornerMax: u32,
    pub setCoreParams: u32,
    pub coreVoltageCornerMin: u32,
    pub coreVoltageCornerTarget: u32,
    pub coreVoltageCornerMax: u32,
}

/// `QnnHtpPerfInfrastructure_HmxV2_t` (declared for the union's size; never sent).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QnnHtpPerfInfrastructure_HmxV2_t {
    pub hmxPickDefault: u32,
    /// `QnnHtpPerfInfrastructure_ExpVoltageCorner_t`.
    pub hmxVoltageCornerMin: u32,
    pub hmxVoltageCornerTarget: u32,
    pub hmxVoltageCornerMax: u32,
    /// `QnnHtpPerfInfrastructure_ClkPerfMode_t`.
    pub hmxPerfMode: u32,
}

/// The anonymous union of `QnnHtpPerfInfrastructure_PowerConfig_t`: which member is meant is
/// the config's `option`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union QnnHtpPerfInfrastructure_PowerConfigUnion_t {
    pub dcvsV3Config: QnnHtpPerfInfrastructure_DcvsV3_t,
    pub rpcControlLatencyConfig: u32,
    pub rpcPollingTimeConfig: u32,
    pub hmxTimeoutIntervalUsConfig: u32,
    pub hmxV2Config: QnnHtpPerfInfrastructure_HmxV2_t,
    pub adaptivePollingTimeConfig: u32,
    pub ddrPerfModeConfig: u32,
}

/// `QnnHtpPerfInfrastructure_PowerConfig_t`: one power setting.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnHtpPerfInfrastructure_PowerConfig_t {
    /// `QnnHtpPerfInfrastructure_PowerConfigOption_t`.
    pub option: u32,
    pub config: QnnHtpPerfInfrastructure_PowerConfigUnion_t,
}

/// `QnnHtpPerfInfrastructure_MemoryConfig_t`. C: `union { uint32_t memGrowSizeConfig; }`, its
/// only member held directly.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QnnHtpPerfInfrastructure_MemoryConfig_t {
    /// `QnnHtpPerfInfrastructure_MemoryConfigOption_t`.
    pub option: u32,
    pub memGrowSizeConfig: u32,
}

// QnnHtpPerfInfrastructure_PowerConfigOption_t
pub const QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_DCVS_V3: u32 = 1;
pub const QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_CONTROL_LATENCY: u32 = 2;
pub const QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_POLLING_TIME: u32 = 3;
/// The longest RPC polling time the headers allow, in microseconds.
pub const QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIG_MAX_RPC_POLLING_TIME: u32 = 9999;

// QnnHtpPerfInfrastructure_PowerMode_t
pub const QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_ADJUST_UP_DOWN: u32 = 0x1;
pub const QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_POWER_SAVER_MODE: u32 = 0x4;
pub const QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE: u32 = 0x10;

// QnnHtpPerfInfrastructure_VoltageCorner_t
pub const DCVS_VOLTAGE_CORNER_DISABLE: u32 = 0x10;
pub const DCVS_VOLTAGE_VCORNER_SVS2: u32 = 0x30;
pub const DCVS_VOLTAGE_VCORNER_SVS: u32 = 0x40;
pub const DCVS_VOLTAGE_VCORNER_SVS_PLUS: u32 = 0x50;
pub const DCVS_VOLTAGE_VCORNER_NOM: u32 = 0x60;
pub const DCVS_VOLTAGE_VCORNER_NOM_PLUS: u32 = 0x70;
pub const DCVS_VOLTAGE_VCORNER_TURBO: u32 = 0x80;
pub const DCVS_VOLTAGE_VCORNER_MAX_VOLTAGE_CORNER: u32 = 0xA0;
