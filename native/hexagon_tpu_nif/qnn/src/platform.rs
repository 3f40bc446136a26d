//! What the device reports about itself (`deviceGetPlatformInfo`): the SoC model, HTP
//! architecture and VTCM size the pre-flight verdict compares a binary's against.
//!
//! Asked once, on the runtime's thread after `deviceCreate`. A backend without the entry, one
//! that answers an error (the x86 emulator; a board whose DSP does not answer), or an answer in
//! a layout this crate does not know gives `None`: the rules that need it are then skipped.

use crate::loader::BackendLibrary;
use crate::preflight::DevicePlatform;
use crate::sys;

/// The first hardware device's platform info, when the backend gives it.
pub(crate) fn read(lib: &BackendLibrary, log: sys::Qnn_LogHandle_t) -> Option<DevicePlatform> {
    let (get, free) = (
        lib.fns.device_get_platform_info?,
        lib.fns.device_free_platform_info?,
    );
    let mut info: *const sys::QnnDevice_PlatformInfo_t = std::ptr::null();
    // SAFETY: `log` is NULL or a live log handle of this library; the out-pointer is valid.
    let status = sys::Status(unsafe { get(log, &mut info) });
    if !status.is_ok() || info.is_null() {
        return None;
    }
    // SAFETY: on success the backend hands out a platform info that stays valid until freed.
    let platform = unsafe { parse(&*info, lib.backend_id) };
    // SAFETY: `info` came from this library's getPlatformInfo and is freed once.
    unsafe { free(log, info) };
    platform
}

/// Reads the first hardware device of `info`; its extension is read only for the HTP backend,
/// whose headers define it.
///
/// # Safety
/// The pointers in `info` must be NULL or valid for what the counts say, as a backend's answer
/// is.
pub(crate) unsafe fn parse(
    info: &sys::QnnDevice_PlatformInfo_t,
    backend_id: u32,
) -> Option<DevicePlatform> {
    if info.version != sys::QNN_DEVICE_INFO_VERSION_1
        || info.v1.numHwDevices == 0
        || info.v1.hwDevices.is_null()
    {
        return None;
    }
    // SAFETY: non-NULL with at least one element (the caller's contract).
    let device = unsafe { &*info.v1.hwDevices };
    if device.version != sys::QNN_DEVICE_INFO_VERSION_1 {
        return None;
    }
    let extension = device.v1.deviceInfoExtension as *const sys::QnnHtpDevice_DeviceInfoExtension_t;
    if backend_id != sys::QNN_BACKEND_ID_HTP || extension.is_null() {
        return Some(DevicePlatform::default());
    }
    // SAFETY: the HTP backend's extension is a QnnHtpDevice_DeviceInfoExtension_t (its header).
    let extension = unsafe { &*extension };
    if extension.devType != sys::QNN_HTP_DEVICE_TYPE_ON_CHIP {
        return Some(DevicePlatform::default());
    }
    let on_chip = extension.onChipDevice;
    Some(DevicePlatform {
        soc_model: Some(on_chip.socModel).filter(|&m| m != 0),
        dsp_arch: Some(on_chip.arch).filter(|&a| a != 0 && a != 0x7fff_ffff),
        vtcm_size: (on_chip.vtcmSize != 0).then(|| on_chip.vtcmSize as u64 * 1024 * 1024),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `parse` reads of a platform info with one device whose extension is `extension`,
    /// after `edit` changed the info (given the device's address to point at, or not).
    fn parse_one(
        mut extension: sys::QnnHtpDevice_DeviceInfoExtension_t,
        backend_id: u32,
        edit: impl FnOnce(&mut sys::QnnDevice_PlatformInfo_t, &mut sys::QnnDevice_HardwareDeviceInfo_t),
    ) -> Option<DevicePlatform> {
        let mut device = sys::QnnDevice_HardwareDeviceInfo_t {
            version: sys::QNN_DEVICE_INFO_VERSION_1,
            v1: sys::QnnDevice_HardwareDeviceInfoV1_t {
                deviceId: 0,
                deviceType: 0,
                numCores: 0,
                cores: std::ptr::null_mut(),
                deviceInfoExtension: (&raw mut extension).cast(),
            },
        };
        let mut info = sys::QnnDevice_PlatformInfo_t {
            version: sys::QNN_DEVICE_INFO_VERSION_1,
            v1: sys::QnnDevice_PlatformInfoV1_t {
                numHwDevices: 1,
                hwDevices: std::ptr::null_mut(),
            },
        };
        edit(&mut info, &mut device);
        if info.v1.hwDevices.is_null() && info.v1.numHwDevices != 0xdead {
            info.v1.hwDevices = &raw mut device;
        } else {
            info.v1.hwDevices = std::ptr::null_mut();
        }
        // SAFETY: every pointer in `info` is NULL or points at a local that outlives the call.
        unsafe { parse(&info, backend_id) }
    }

    fn on_chip(soc: u32, arch: u32, vtcm_mb: usize) -> sys::QnnHtpDevice_DeviceInfoExtension_t {
        sys::QnnHtpDevice_DeviceInfoExtension_t {
            devType: sys::QNN_HTP_DEVICE_TYPE_ON_CHIP,
            onChipDevice: sys::QnnHtpDevice_OnChipDeviceInfoExtension_t {
                vtcmSize: vtcm_mb,
                socModel: soc,
                signedPdSupport: true,
                dlbcSupport: false,
                arch,
            },
        }
    }

    const HTP: u32 = sys::QNN_BACKEND_ID_HTP;

    #[test]
    fn reads_soc_arch_and_vtcm_of_an_on_chip_htp() {
        assert_eq!(
            parse_one(on_chip(35, 68, 4), HTP, |_, _| {}),
            Some(DevicePlatform {
                soc_model: Some(35),
                dsp_arch: Some(68),
                vtcm_size: Some(4 * 1024 * 1024),
            })
        );
        // Another backend's extension is not read as the HTP's.
        let other = parse_one(on_chip(35, 68, 4), 3, |_, _| {});
        assert_eq!(other, Some(DevicePlatform::default()));
        // Nor is a device that is not on the chip, or one without an extension.
        let mut remote = on_chip(35, 68, 4);
        remote.devType = 1;
        assert_eq!(
            parse_one(remote, HTP, |_, _| {}),
            Some(DevicePlatform::default())
        );
        let bare = parse_one(on_chip(35, 68, 4), HTP, |_, d| {
            d.v1.deviceInfoExtension = std::ptr::null_mut()
        });
        assert_eq!(bare, Some(DevicePlatform::default()));
    }

    #[test]
    fn unknown_versions_no_devices_and_unset_fields_read_as_nothing() {
        let unset = parse_one(on_chip(0, 0x7fff_ffff, 0), HTP, |_, _| {});
        assert_eq!(unset, Some(DevicePlatform::default()));
        let edits: [fn(&mut _, &mut sys::QnnDevice_HardwareDeviceInfo_t); 4] = [
            |i: &mut sys::QnnDevice_PlatformInfo_t, _| i.version = 2,
            |_, d| d.version = 2,
            |i: &mut sys::QnnDevice_PlatformInfo_t, _| i.v1.numHwDevices = 0,
            // a count with a NULL array
            |i: &mut sys::QnnDevice_PlatformInfo_t, _| i.v1.numHwDevices = 0xdead,
        ];
        for edit in edits {
            assert_eq!(parse_one(on_chip(35, 68, 4), HTP, edit), None);
        }
    }
}
