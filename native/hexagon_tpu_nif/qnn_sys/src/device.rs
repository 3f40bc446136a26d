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

/// `QnnHtpDevice_OnChipDeviceInfoExtension_t` (HTP/QnnHtpDevice.h): an HTP inside the SoC.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnHtpDevice_OnChipDeviceInfoExtension_t {
    /// The device's VTCM, in MB.
    pub vtcmSize: usize,
    pub socModel: u32,
    pub signedPdSupport: bool,
    pub dlbcSupport: bool,
    /// `QnnHtpDevice_Arch_t`: 68 for v68, and so on.
    pub arch: u32,
}

/// `QnnHtpDevice_DeviceInfoExtension_t`, what an HTP backend's `deviceInfoExtension` points to.
/// C: `union { QnnHtpDevice_OnChipDeviceInfoExtension_t onChipDevice; }`, its only member held
/// directly.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnHtpDevice_DeviceInfoExtension_t {
    /// `QnnHtpDevice_DeviceType_t`.
    pub devType: u32,
    pub onChipDevice: QnnHtpDevice_OnChipDeviceInfoExtension_t,
}

/// `QNN_HTP_DEVICE_TYPE_ON_CHIP`: the HTP cores are inside the SoC.
pub const QNN_HTP_DEVICE_TYPE_ON_CHIP: u32 = 0;
