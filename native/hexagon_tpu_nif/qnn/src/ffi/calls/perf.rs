//! The HTP backend's perf infrastructure (`deviceGetInfrastructure`) and its power-config calls.

use crate::base::error::Result;
use crate::ffi::loader::BackendLibrary;
use crate::sys;

/// The power-config functions of an HTP backend's perf infrastructure. The backend owns them
/// for its whole life; their errors are reported through its library.
#[derive(Clone, Copy)]
pub(crate) struct PerfInfrastructure {
    create: sys::QnnHtpPerfInfrastructure_CreatePowerConfigIdFn_t,
    destroy: sys::QnnHtpPerfInfrastructure_DestroyPowerConfigIdFn_t,
    set_power_config: sys::QnnHtpPerfInfrastructure_SetPowerConfigFn_t,
}

impl BackendLibrary {
    /// `deviceGetInfrastructure`'s perf functions, or why there are none.
    pub(crate) fn perf_infrastructure(&self) -> std::result::Result<PerfInfrastructure, String> {
        let get = self
            .fns
            .device_get_infrastructure
            .ok_or("the backend has no deviceGetInfrastructure")?;
        let mut infra: *mut std::ffi::c_void = std::ptr::null_mut();
        self.checked("deviceGetInfrastructure", || {
            // SAFETY: the out-pointer is valid for a write of one pointer.
            unsafe { get(&mut infra) }
        })
        .map_err(|e| e.to_string())?;
        if infra.is_null() {
            return Err("deviceGetInfrastructure answered NULL".into());
        }
        // SAFETY: an HTP backend's infrastructure is a `QnnHtpDevice_Infrastructure_t` it owns
        // for its whole life (QnnHtpDevice.h); it is only read, by value.
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
            (Some(create), Some(destroy), Some(set_power_config)) => Ok(PerfInfrastructure {
                create,
                destroy,
                set_power_config,
            }),
            _ => Err("the perf infrastructure lacks a power config function".into()),
        }
    }
}

impl PerfInfrastructure {
    /// `createPowerConfigId` for device 0, core 0 (as ONNX Runtime's QNN EP).
    pub(crate) fn create_power_config_id(&self, lib: &BackendLibrary) -> Result<u32> {
        let mut id = 0u32;
        lib.checked("createPowerConfigId", || {
            // SAFETY: the out-pointer is valid for a write of a u32.
            unsafe { (self.create)(0, 0, &mut id) }
        })?;
        Ok(id)
    }

    /// `destroyPowerConfigId`.
    ///
    /// # Safety
    /// `id` came from this infrastructure's `create_power_config_id` and is not used after.
    pub(crate) unsafe fn destroy_power_config_id(
        &self,
        lib: &BackendLibrary,
        id: u32,
    ) -> Result<()> {
        // SAFETY: the caller's contract: a live id, destroyed once.
        lib.checked("destroyPowerConfigId", || unsafe { (self.destroy)(id) })
    }

    /// `setPowerConfig` with `configs`, in order.
    ///
    /// # Safety
    /// `id` came from this infrastructure's `create_power_config_id` and is not destroyed.
    pub(crate) unsafe fn set_power_config(
        &self,
        lib: &BackendLibrary,
        id: u32,
        configs: &[&sys::QnnHtpPerfInfrastructure_PowerConfig_t],
    ) -> Result<()> {
        let list: Vec<*const sys::QnnHtpPerfInfrastructure_PowerConfig_t> = (configs.iter())
            .map(|&config| std::ptr::from_ref(config))
            .chain([std::ptr::null()])
            .collect();
        lib.checked("setPowerConfig", || {
            // SAFETY: `list` is a NULL-terminated array of pointers to configs that outlive the
            // call; `id` per the caller's contract.
            unsafe { (self.set_power_config)(id, list.as_ptr()) }
        })
    }
}
