//! Platform information returned by `QnnDevice_getPlatformInfo`.

use std::ffi::c_void;

/// `QnnDevice_CoreInfoV1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnDevice_CoreInfoV1_t {
    pub coreId: u32,
    pub coreType: u32,
    pub coreInfoExtension: *mut c_void,
}

/// `QnnDevice_CoreInfo_t`. C: `union { QnnDevice_CoreInfoV1_t v1; }`, its only member held
/// directly.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnDevice_CoreInfo_t {
    pub version: u32,
    pub v1: QnnDevice_CoreInfoV1_t,
}

/// `QnnDevice_HardwareDeviceInfoV1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnDevice_HardwareDeviceInfoV1_t {
    pub deviceId: u32,
    pub deviceType: u32,
    pub numCores: u32,
    pub cores: *mut QnnDevice_CoreInfo_t,
    pub deviceInfoExtension: *mut c_void,
}

/// `QnnDevice_HardwareDeviceInfo_t`, with its one-member union held directly.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnDevice_HardwareDeviceInfo_t {
    pub version: u32,
    pub v1: QnnDevice_HardwareDeviceInfoV1_t,
}

/// `QnnDevice_PlatformInfoV1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnDevice_PlatformInfoV1_t {
    pub numHwDevices: u32,
    pub hwDevices: *mut QnnDevice_HardwareDeviceInfo_t,
}

/// `QnnDevice_PlatformInfo_t`, with its one-member union held directly.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnDevice_PlatformInfo_t {
    pub version: u32,
    pub v1: QnnDevice_PlatformInfoV1_t,
}

/// `QNN_DEVICE_*_INFO_VERSION_1`: the only version of the three structs above.
pub const QNN_DEVICE_INFO_VERSION_1: u32 = 1;
