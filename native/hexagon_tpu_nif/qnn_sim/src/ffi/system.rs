//! QnnSystem entry points (the `QnnSystemInterface_t` table).

use std::ffi::c_void;
use std::mem::size_of;

use qnn_sys::*;

use super::metadata::{self, MetaParams};
use super::state::*;
use crate::format;

fn create(out: *mut QnnSystemContext_Handle_t, stride: usize) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() {
            return err(QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT);
        }
        let h = registry().insert(Obj::System(SystemObj {
            stride,
            infos: Vec::new(),
        }));
        // SAFETY: checked non-NULL; the caller's out-parameter.
        unsafe { out.write(handle_ptr(h)) };
        0
    })
}

/// `QnnSystemContext_create` (System API >= 1.4: 88-byte GraphInfo elements).
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnSystemContext_create(
    out: *mut QnnSystemContext_Handle_t,
) -> Qnn_ErrorHandle_t {
    create(
        out,
        graph_info_stride(QNN_SYSTEM_API_VERSION_MINOR).unwrap_or(88),
    )
}

/// The `systemContextCreate` of providers reporting System API < 1.4: answers made through
/// its handles lay GraphInfo elements out 64 bytes apart (V1/V2 only).
///
/// # Safety
/// `out` must be NULL or valid for a write.
pub unsafe extern "C" fn QnnSimSystemContext_create_v1_1(
    out: *mut QnnSystemContext_Handle_t,
) -> Qnn_ErrorHandle_t {
    create(out, graph_info_stride(1).unwrap_or(64))
}

/// Shared body of getMetaData / getBinaryInfo.
///
/// # Safety
/// `binary` must be NULL or readable for `size` bytes.
unsafe fn metadata(
    handle: QnnSystemContext_Handle_t,
    binary: *const c_void,
    size: u64,
) -> Result<*const QnnSystemContext_BinaryInfo_t, Qnn_ErrorHandle_t> {
    let h = handle_id(handle);
    if !registry().has(h, Kind::System) {
        return Err(err(QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE));
    }
    if binary.is_null() || size == 0 || size > isize::MAX as u64 {
        return Err(err(QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT));
    }
    // SAFETY: non-NULL; the caller guarantees `size` readable bytes for the call's duration.
    let bytes = unsafe { std::slice::from_raw_parts(binary.cast::<u8>(), size as usize) };
    let model =
        format::decode(bytes).map_err(|_| err(QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY))?;
    let k = knobs();
    let mut reg = registry();
    let Some(Obj::System(sys)) = reg.objects.get_mut(&h) else {
        return Err(err(QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE));
    };
    let params = MetaParams {
        backend_id: model.stamp.backend_id.unwrap_or(k.backend_id),
        build_id: intern(model.stamp.build_id.as_deref().unwrap_or(&k.build_id)),
        core_api: k.core_api(),
        backend_api: k.backend_api,
        stride: sys.stride,
        binary_len: size,
    };
    let arena = metadata::build(&model, &params);
    let p = arena.info_ptr();
    sys.infos.push(arena);
    Ok(p)
}

/// `QnnSystemContext_getMetaData`: the answer stays valid until `systemContextFree`.
///
/// # Safety
/// `binary` must be NULL or readable for `size` bytes; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnSystemContext_getMetaData(
    handle: QnnSystemContext_Handle_t,
    binary: *const c_void,
    size: u64,
    out: *mut *const QnnSystemContext_BinaryInfo_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() {
            return err(QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: forwarded caller contract.
        match unsafe { metadata(handle, binary, size) } {
            Ok(p) => {
                // SAFETY: checked non-NULL; the caller's out-parameter.
                unsafe { out.write(p) };
                0
            }
            Err(e) => e,
        }
    })
}

/// `QnnSystemContext_getBinaryInfo` (deprecated in QNN, still served): like getMetaData, plus
/// the size of the returned struct in `out_size` (may be NULL).
///
/// # Safety
/// `binary` must be NULL or readable for `size` bytes; `out`/`out_size` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnSystemContext_getBinaryInfo(
    handle: QnnSystemContext_Handle_t,
    binary: *mut c_void,
    size: u64,
    out: *mut *const QnnSystemContext_BinaryInfo_t,
    out_size: *mut u64,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() {
            return err(QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: forwarded caller contract (the buffer is only read).
        match unsafe { metadata(handle, binary.cast_const(), size) } {
            Ok(p) => {
                // SAFETY: checked non-NULL / NULL-checked; the caller's out-parameters.
                unsafe {
                    out.write(p);
                    if !out_size.is_null() {
                        out_size.write(size_of::<QnnSystemContext_BinaryInfo_t>() as u64);
                    }
                }
                0
            }
            Err(e) => e,
        }
    })
}

/// `QnnSystemContext_free`: frees the handle and every answer given through it.
///
/// # Safety
/// None beyond passing a handle value; answers given through it must no longer be read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnSystemContext_free(
    handle: QnnSystemContext_Handle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        let h = handle_id(handle);
        let removed = {
            let mut reg = registry();
            if !reg.has(h, Kind::System) {
                return err(QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE);
            }
            reg.objects.remove(&h)
        };
        drop(removed);
        0
    })
}
