//! What the device reports about itself (`deviceGetPlatformInfo`): its hardware devices and
//! cores and, from the HTP backend's extension, the SoC model, HTP architecture and VTCM size
//! the pre-flight verdict compares a binary's against. The doctor's probe
//! ([`crate::inspect::probe_backend`]) and every runtime (on its thread, after `deviceCreate`)
//! read it here.

use crate::base::error::{Error, Result};
use crate::ffi::loader::BackendLibrary;
use crate::sys;

/// What the device reports about itself (`deviceGetPlatformInfo`); every field optional.
/// `vtcm_size` is in bytes (the device reports MB).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevicePlatform {
    pub soc_model: Option<u32>,
    pub dsp_arch: Option<u32>,
    pub vtcm_size: Option<u64>,
}

/// One hardware device of `deviceGetPlatformInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HardwareDevice {
    pub id: u32,
    pub device_type: u32,
    /// `(core id, core type)` of each core.
    pub cores: Vec<(u32, u32)>,
    /// What the HTP backend's extension says of an on-chip device; the default (every field
    /// `None`) for other backends and devices.
    pub htp: DevicePlatform,
}

/// More hardware devices or cores than this in a platform info is taken as corrupt.
const MAX_PLATFORM_ENTRIES: u32 = 64;

/// The backend's platform info, `None` when the library has no `deviceGetPlatformInfo`.
pub(crate) fn read(
    lib: &BackendLibrary,
    log: sys::Qnn_LogHandle_t,
) -> Option<Result<Vec<HardwareDevice>>> {
    // SAFETY: `log` is NULL or a live log handle of this library (the caller's).
    let info = match unsafe { lib.device_platform_info(log)? } {
        Ok(info) => info,
        Err(error) => return Some(Err(error)),
    };
    if info.is_null() {
        return Some(Err(Error::invalid_model(
            "deviceGetPlatformInfo succeeded but returned no platform info",
        )));
    }
    // SAFETY: a successful call returned a platform info owned by the library until it is freed
    // below; every count is bounded before its array is read.
    let devices = unsafe { read_platform_info(info, lib.backend_id) };
    // SAFETY: `info` came from deviceGetPlatformInfo with this `log` and is freed once, after its
    // last use.
    if let Err(error) = unsafe { lib.device_free_platform_info(log, info) } {
        return Some(Err(error));
    }
    Some(devices)
}

/// What the runtime's device is, for the verdict: the first hardware device's, when the
/// backend answered (a backend without the entry, or one that answers an error, as a board
/// whose DSP does not answer would, gives `None`: the rules that need it are skipped).
pub(crate) fn device(read: Option<Result<Vec<HardwareDevice>>>) -> Option<DevicePlatform> {
    read?.ok()?.into_iter().next().map(|device| device.htp)
}

/// # Safety
/// `info` must point to a `QnnDevice_PlatformInfo_t` whose arrays hold the counts they report,
/// and whose extensions are what `backend_id`'s headers say they are.
unsafe fn read_platform_info(
    info: *const sys::QnnDevice_PlatformInfo_t,
    backend_id: u32,
) -> Result<Vec<HardwareDevice>> {
    let bad = |what: String| Error::invalid_model(format!("deviceGetPlatformInfo: {what}"));
    // SAFETY: readable per the contract.
    let info = unsafe { *info };
    if info.version != sys::QNN_DEVICE_INFO_VERSION_1 {
        return Err(bad(format!(
            "unknown platform info version {}",
            info.version
        )));
    }
    let count = info.v1.numHwDevices;
    if count > MAX_PLATFORM_ENTRIES || (count > 0 && info.v1.hwDevices.is_null()) {
        return Err(bad(format!(
            "{count} hardware devices at {:p}",
            info.v1.hwDevices
        )));
    }
    let mut devices = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        // SAFETY: index within the non-NULL array of `count` devices.
        let device = unsafe { *info.v1.hwDevices.add(i) };
        if device.version != sys::QNN_DEVICE_INFO_VERSION_1 {
            return Err(bad(format!("device {i} has version {}", device.version)));
        }
        let d = device.v1;
        if d.numCores > MAX_PLATFORM_ENTRIES || (d.numCores > 0 && d.cores.is_null()) {
            return Err(bad(format!(
                "device {i} has {} cores at {:p}",
                d.numCores, d.cores
            )));
        }
        let mut cores = Vec::with_capacity(d.numCores as usize);
        for c in 0..d.numCores as usize {
            // SAFETY: index within the non-NULL array of `numCores` cores.
            let core = unsafe { *d.cores.add(c) };
            if core.version != sys::QNN_DEVICE_INFO_VERSION_1 {
                return Err(bad(format!(
                    "device {i} core {c} has version {}",
                    core.version
                )));
            }
            cores.push((core.v1.coreId, core.v1.coreType));
        }
        let extension = d.deviceInfoExtension as *const sys::QnnHtpDevice_DeviceInfoExtension_t;
        let htp = if backend_id == sys::QNN_BACKEND_ID_HTP && !extension.is_null() {
            // SAFETY: the HTP backend's extension is a QnnHtpDevice_DeviceInfoExtension_t (its
            // header), non-NULL.
            unsafe { on_chip(&*extension) }
        } else {
            DevicePlatform::default()
        };
        devices.push(HardwareDevice {
            id: d.deviceId,
            device_type: d.deviceType,
            cores,
            htp,
        });
    }
    Ok(devices)
}

/// An HTP extension's facts; nothing for a device that is not on the chip.
fn on_chip(extension: &sys::QnnHtpDevice_DeviceInfoExtension_t) -> DevicePlatform {
    if extension.devType != sys::QNN_HTP_DEVICE_TYPE_ON_CHIP {
        return DevicePlatform::default();
    }
    let on_chip = extension.onChipDevice;
    DevicePlatform {
        soc_model: Some(on_chip.socModel).filter(|&m| m != 0),
        // QNN_HTP_DEVICE_ARCH_NONE (0) and _UNKNOWN (0x7fffffff) say nothing.
        dsp_arch: Some(on_chip.arch).filter(|&a| a != 0 && a != 0x7fff_ffff),
        // The header's unit is MB.
        vtcm_size: (on_chip.vtcmSize != 0).then(|| on_chip.vtcmSize as u64 * 1024 * 1024),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HTP: u32 = sys::QNN_BACKEND_ID_HTP;

    fn on_chip_extension(
        soc: u32,
        arch: u32,
        vtcm_mb: usize,
    ) -> sys::QnnHtpDevice_DeviceInfoExtension_t {
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

    /// What `read_platform_info` reads of a platform info with one device (one core) whose
    /// extension is `extension`, after `edit` changed the info or the device.
    fn read_one(
        mut extension: sys::QnnHtpDevice_DeviceInfoExtension_t,
        backend_id: u32,
        edit: impl FnOnce(&mut sys::QnnDevice_PlatformInfo_t, &mut sys::QnnDevice_HardwareDeviceInfo_t),
    ) -> Result<Vec<HardwareDevice>> {
        let mut core = sys::QnnDevice_CoreInfo_t {
            version: sys::QNN_DEVICE_INFO_VERSION_1,
            v1: sys::QnnDevice_CoreInfoV1_t {
                coreId: 0,
                coreType: 0,
                coreInfoExtension: std::ptr::null_mut(),
            },
        };
        let mut device = sys::QnnDevice_HardwareDeviceInfo_t {
            version: sys::QNN_DEVICE_INFO_VERSION_1,
            v1: sys::QnnDevice_HardwareDeviceInfoV1_t {
                deviceId: 0,
                deviceType: 0,
                numCores: 1,
                cores: &raw mut core,
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
        if info.v1.numHwDevices == 1 {
            info.v1.hwDevices = &raw mut device;
        }
        // SAFETY: every pointer in `info` is NULL or points at a local that outlives the call.
        unsafe { read_platform_info(&info, backend_id) }
    }

    fn htp_of(read: Result<Vec<HardwareDevice>>) -> Option<DevicePlatform> {
        device(Some(read))
    }

    #[test]
    fn reads_soc_arch_and_vtcm_of_an_on_chip_htp() {
        let read = read_one(on_chip_extension(35, 68, 4), HTP, |_, _| {}).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].cores, [(0, 0)]);
        assert_eq!(
            read[0].htp,
            DevicePlatform {
                soc_model: Some(35),
                dsp_arch: Some(68),
                vtcm_size: Some(4 * 1024 * 1024),
            }
        );
        // Another backend's extension is not read as the HTP's.
        let other = read_one(on_chip_extension(35, 68, 4), 3, |_, _| {});
        assert_eq!(htp_of(other), Some(DevicePlatform::default()));
        // Nor is a device that is not on the chip, or one without an extension.
        let mut remote = on_chip_extension(35, 68, 4);
        remote.devType = 1;
        let remote = read_one(remote, HTP, |_, _| {});
        assert_eq!(htp_of(remote), Some(DevicePlatform::default()));
        let bare = read_one(on_chip_extension(35, 68, 4), HTP, |_, d| {
            d.v1.deviceInfoExtension = std::ptr::null_mut()
        });
        assert_eq!(htp_of(bare), Some(DevicePlatform::default()));
        // Unset fields say nothing.
        let unset = read_one(on_chip_extension(0, 0x7fff_ffff, 0), HTP, |_, _| {});
        assert_eq!(htp_of(unset), Some(DevicePlatform::default()));
    }

    #[test]
    fn unknown_versions_and_impossible_counts_are_errors_and_no_device() {
        type Edit =
            fn(&mut sys::QnnDevice_PlatformInfo_t, &mut sys::QnnDevice_HardwareDeviceInfo_t);
        let edits: [(Edit, &str); 4] = [
            (|i, _| i.version = 2, "unknown platform info version 2"),
            (|_, d| d.version = 2, "device 0 has version 2"),
            (|i, _| i.v1.numHwDevices = 65, "65 hardware devices"),
            (
                |_, d| d.v1.cores = std::ptr::null_mut(),
                "device 0 has 1 cores at 0x0",
            ),
        ];
        for (edit, message) in edits {
            let read = read_one(on_chip_extension(35, 68, 4), HTP, edit);
            let error = read.as_ref().unwrap_err().to_string();
            assert!(error.contains(message), "{error}");
            assert_eq!(htp_of(read), None);
        }
        // No devices at all: nothing to judge either.
        let none = read_one(on_chip_extension(35, 68, 4), HTP, |i, _| {
            i.v1.numHwDevices = 0
        });
        assert_eq!(htp_of(none), None);
        assert_eq!(device(None), None);
    }
}
