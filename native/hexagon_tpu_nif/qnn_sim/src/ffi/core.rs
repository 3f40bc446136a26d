//! Core QNN entry points (the `QnnInterface_t` table), exported under their QNN names too.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use qnn_sys::*;

use super::execute_async::{AsyncQueue, DEFAULT_QUEUE_DEPTH, MAX_QUEUE_DEPTH};
use super::state::*;
use crate::format::{self, FormatError};

/// Writes `value` through an out-pointer the caller passed, if it is not NULL.
///
/// # Safety
/// `out` must be NULL or valid for a write of `T` (QNN's contract for out-parameters).
unsafe fn put<T>(out: *mut T, value: T) -> bool {
    if out.is_null() {
        return false;
    }
    // SAFETY: non-NULL, and the caller guarantees it points to writable storage for a T.
    unsafe { out.write(value) };
    true
}

/// `QnnProperty_hasCapability`: `QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION` is supported (0)
/// unless the `graphExecuteAsync` entry is made NULL; every other capability is reported as not
/// supported.
///
/// # Safety
/// None (takes a value); `unsafe` only to match the table's function type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnProperty_hasCapability(key: u32) -> Qnn_ErrorHandle_t {
    guard(|| {
        let nulls = knobs().null_entries;
        let on = |entry: &str| !nulls.iter().any(|n| n == entry);
        if (key == QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION && on("graphExecuteAsync"))
            || (key == QNN_PROPERTY_PROFILE_SUPPORTS_EXTENDED_EVENT
                && on("profileGetExtendedEventData"))
            || (key == QNN_PROPERTY_PROFILE_SUPPORT_OPTRACE_CONFIG && on("profileSetConfig"))
        {
            0
        } else {
            err(QNN_COMMON_ERROR_NOT_SUPPORTED)
        }
    })
}

/// `QnnLog_create`. The callback gets an ERROR line when a context cannot be created and
/// `log_per_execute` WARN lines per execute, through a C `va_list` (src/ffi/log_shim.c).
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnLog_create(
    callback: *const c_void,
    max_level: u32,
    out: *mut Qnn_LogHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() || !(QNN_LOG_LEVEL_ERROR..=QNN_LOG_LEVEL_DEBUG).contains(&max_level) {
            return err(QNN_LOG_ERROR_INVALID_ARGUMENT);
        }
        let h = registry().insert(Obj::Log {
            callback: callback as usize,
            max_level,
        });
        // SAFETY: checked non-NULL; caller's out-parameter.
        unsafe { put(out, handle_ptr(h)) };
        0
    })
}

/// `QnnLog_setLogLevel`.
///
/// # Safety
/// None beyond passing a handle value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnLog_setLogLevel(log: Qnn_LogHandle_t, level: u32) -> Qnn_ErrorHandle_t {
    guard(|| {
        if !registry().has(handle_id(log), Kind::Log) {
            return err(QNN_LOG_ERROR_INVALID_HANDLE);
        }
        if !(QNN_LOG_LEVEL_ERROR..=QNN_LOG_LEVEL_DEBUG).contains(&level) {
            return err(QNN_LOG_ERROR_INVALID_ARGUMENT);
        }
        0
    })
}

/// `QnnLog_free`. Refused (1005) while a backend or device created with it is alive.
///
/// # Safety
/// None beyond passing a handle value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnLog_free(log: Qnn_LogHandle_t) -> Qnn_ErrorHandle_t {
    guard(|| {
        let h = handle_id(log);
        let mut reg = registry();
        if !reg.has(h, Kind::Log) {
            return err(QNN_LOG_ERROR_INVALID_HANDLE);
        }
        let in_use = reg
            .objects
            .values()
            .any(|o| matches!(o, Obj::Backend { log } | Obj::Device { log } if *log == h));
        if in_use {
            LIFETIME_VIOLATIONS.fetch_add(1, Ordering::SeqCst);
            return err(QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED);
        }
        reg.objects.remove(&h);
        0
    })
}

fn check_log(reg: &Registry, log: Qnn_LogHandle_t) -> Result<u64, Qnn_ErrorHandle_t> {
    let h = handle_id(log);
    if h == 0 || reg.has(h, Kind::Log) {
        Ok(h)
    } else {
        Err(err(QNN_LOG_ERROR_INVALID_HANDLE))
    }
}

/// `QnnBackend_create`. Fails with the `fail_backend_create` knob's code when set.
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnBackend_create(
    log: Qnn_LogHandle_t,
    _config: *const *const c_void,
    out: *mut Qnn_BackendHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        if let Some(code) = knobs().fail_backend_create {
            return err(code);
        }
        let mut reg = registry();
        let log = match check_log(&reg, log) {
            Ok(l) => l,
            Err(e) => return e,
        };
        let h = reg.insert(Obj::Backend { log });
        // SAFETY: checked non-NULL; caller's out-parameter.
        unsafe { put(out, handle_ptr(h)) };
        0
    })
}

/// `QnnBackend_getApiVersion`: the highest offered 2.x core version and the `backend_api` knob.
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnBackend_getApiVersion(out: *mut Qnn_ApiVersion_t) -> Qnn_ErrorHandle_t {
    guard(|| {
        let k = knobs();
        let v = Qnn_ApiVersion_t {
            coreApiVersion: k.core_api(),
            backendApiVersion: k.backend_api,
        };
        // SAFETY: `put` checks NULL; caller's out-parameter.
        if unsafe { put(out, v) } {
            0
        } else {
            err(QNN_COMMON_ERROR_INVALID_ARGUMENT)
        }
    })
}

/// `QnnBackend_getBuildId`: a static string valid until unload.
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnBackend_getBuildId(out: *mut *const c_char) -> Qnn_ErrorHandle_t {
    guard(|| {
        let s = intern(&knobs().build_id);
        // SAFETY: `put` checks NULL; caller's out-parameter.
        if unsafe { put(out, s) } {
            0
        } else {
            err(QNN_COMMON_ERROR_INVALID_ARGUMENT)
        }
    })
}

/// `QnnBackend_free`. Refused (1005) while a context created on it is alive.
///
/// # Safety
/// None beyond passing a handle value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnBackend_free(backend: Qnn_BackendHandle_t) -> Qnn_ErrorHandle_t {
    guard(|| {
        let h = handle_id(backend);
        let mut reg = registry();
        if !reg.has(h, Kind::Backend) {
            return err(QNN_BACKEND_ERROR_INVALID_HANDLE);
        }
        if reg
            .objects
            .values()
            .any(|o| matches!(o, Obj::Context(c) if c.backend == h))
        {
            LIFETIME_VIOLATIONS.fetch_add(1, Ordering::SeqCst);
            return err(QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED);
        }
        reg.objects.remove(&h);
        0
    })
}

/// `QnnDevice_create`. Fails with the `fail_device_create` knob's code when set (1000 =
/// NOT_SUPPORTED, which a runtime should treat as "no device").
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnDevice_create(
    log: Qnn_LogHandle_t,
    _config: *const *const c_void,
    out: *mut Qnn_DeviceHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        if let Some(code) = knobs().fail_device_create {
            return err(code);
        }
        let mut reg = registry();
        let log = match check_log(&reg, log) {
            Ok(l) => l,
            Err(e) => return e,
        };
        let h = reg.insert(Obj::Device { log });
        // SAFETY: checked non-NULL; caller's out-parameter.
        unsafe { put(out, handle_ptr(h)) };
        0
    })
}

/// One `deviceGetPlatformInfo` answer: the info, its one device and the HTP extension, in one
/// allocation so the pointers between them stay valid until `deviceFreePlatformInfo`.
struct PlatformAnswer {
    info: QnnDevice_PlatformInfo_t,
    device: QnnDevice_HardwareDeviceInfo_t,
    extension: QnnHtpDevice_DeviceInfoExtension_t,
}

// SAFETY: the raw pointers inside point into the same allocation; it is only read.
unsafe impl Send for PlatformAnswer {}

/// Answers handed out and not yet freed, by the address of their info.
static PLATFORM_ANSWERS: LazyLock<Mutex<HashMap<usize, Box<PlatformAnswer>>>> =
    LazyLock::new(Default::default);

/// Platform infos handed out and not yet freed (they count as live handles).
pub fn platform_infos_out() -> u64 {
    lock(&PLATFORM_ANSWERS).len() as u64
}

/// `QnnDevice_getPlatformInfo`: the `device_platform` knob's on-chip HTP, or NOT_SUPPORTED
/// (1000) when the knob is unset, as the x86 emulator answers.
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnDevice_getPlatformInfo(
    _log: Qnn_LogHandle_t,
    out: *mut *const QnnDevice_PlatformInfo_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        let Some(knob) = knobs().device_platform else {
            return err(QNN_DEVICE_ERROR_UNSUPPORTED_FEATURE);
        };
        let mut answer = Box::new(PlatformAnswer {
            info: QnnDevice_PlatformInfo_t {
                version: QNN_DEVICE_INFO_VERSION_1,
                v1: QnnDevice_PlatformInfoV1_t {
                    numHwDevices: 1,
                    hwDevices: std::ptr::null_mut(),
                },
            },
            device: QnnDevice_HardwareDeviceInfo_t {
                version: QNN_DEVICE_INFO_VERSION_1,
                v1: QnnDevice_HardwareDeviceInfoV1_t {
                    deviceId: 0,
                    deviceType: QNN_HTP_DEVICE_TYPE_ON_CHIP,
                    numCores: 0,
                    cores: std::ptr::null_mut(),
                    deviceInfoExtension: std::ptr::null_mut(),
                },
            },
            extension: QnnHtpDevice_DeviceInfoExtension_t {
                devType: QNN_HTP_DEVICE_TYPE_ON_CHIP,
                onChipDevice: QnnHtpDevice_OnChipDeviceInfoExtension_t {
                    vtcmSize: knob.vtcm_mb,
                    socModel: knob.soc_model,
                    signedPdSupport: true,
                    dlbcSupport: false,
                    arch: knob.htp_arch,
                },
            },
        });
        answer.device.v1.deviceInfoExtension = (&raw mut answer.extension).cast();
        answer.info.v1.hwDevices = &raw mut answer.device;
        let info: *const QnnDevice_PlatformInfo_t = &answer.info;
        lock(&PLATFORM_ANSWERS).insert(info as usize, answer);
        // SAFETY: checked non-NULL; caller's out-parameter.
        unsafe { put(out, info) };
        0
    })
}

/// `QnnDevice_freePlatformInfo`: frees an answer of `getPlatformInfo`, once; anything else is
/// INVALID_ARGUMENT.
///
/// # Safety
/// None beyond passing a pointer value (it is looked up, never dereferenced).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnDevice_freePlatformInfo(
    _log: Qnn_LogHandle_t,
    info: *const QnnDevice_PlatformInfo_t,
) -> Qnn_ErrorHandle_t {
    guard(|| match lock(&PLATFORM_ANSWERS).remove(&(info as usize)) {
        Some(_) => 0,
        None => err(QNN_COMMON_ERROR_INVALID_ARGUMENT),
    })
}

/// `QnnDevice_free`. Refused (1005) while a context created on it is alive.
///
/// # Safety
/// None beyond passing a handle value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnDevice_free(device: Qnn_DeviceHandle_t) -> Qnn_ErrorHandle_t {
    guard(|| {
        let h = handle_id(device);
        let mut reg = registry();
        if !reg.has(h, Kind::Device) {
            return err(QNN_DEVICE_ERROR_INVALID_HANDLE);
        }
        if reg
            .objects
            .values()
            .any(|o| matches!(o, Obj::Context(c) if c.device == h))
        {
            LIFETIME_VIOLATIONS.fetch_add(1, Ordering::SeqCst);
            return err(QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED);
        }
        reg.objects.remove(&h);
        0
    })
}

/// `QnnContext_createFromBinary`: parses the binary (5005 if malformed, 5004 for an unknown
/// format version), applies context-creation faults, registers the context and its graphs.
///
/// # Safety
/// `binary` must be NULL or readable for `binary_size` bytes; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnContext_createFromBinary(
    backend: Qnn_BackendHandle_t,
    device: Qnn_DeviceHandle_t,
    config: *const *const QnnContext_Config_t,
    binary: *const c_void,
    binary_size: u64,
    out: *mut Qnn_ContextHandle_t,
    _profile: Qnn_ProfileHandle_t,
) -> Qnn_ErrorHandle_t {
    // SAFETY: forwarded caller contract.
    let status = unsafe { create_from_binary(backend, device, config, binary, binary_size, out) };
    if status == 0 {
        let lines = knobs().log_on_load;
        let reg = registry();
        for line in lines {
            let line = CString::new(line).unwrap_or_default();
            reg.log_verbatim(handle_id(backend), QNN_LOG_LEVEL_WARN, &line);
        }
    }
    if status != 0 {
        // Like a real backend, explain the failure in the log.
        let code = status & 0xFFFF;
        let why = match code as u32 {
            QNN_CONTEXT_ERROR_CREATE_FROM_BINARY => "the binary is not a qnn_sim context binary",
            QNN_CONTEXT_ERROR_BINARY_VERSION => "unknown context-binary format version",
            QNN_CONTEXT_ERROR_INVALID_CONFIG => "an invalid context config",
            _ => "injected fault",
        };
        let line = CString::new(format!("contextCreateFromBinary failed with {code}: {why}"))
            .unwrap_or_default();
        registry().log(handle_id(backend), QNN_LOG_LEVEL_ERROR, &line);
    }
    status
}

/// The body of `QnnContext_createFromBinary`.
///
/// # Safety
/// The last config of a `contextCreateFromBinary` config array with option `option` (QNN: the
/// last of a repeated option wins).
///
/// # Safety
/// `config` must be NULL or a NULL-terminated array of pointers to readable configs.
pub unsafe fn last_config(
    config: *const *const QnnContext_Config_t,
    option: u32,
) -> Option<QnnContext_Config_t> {
    if config.is_null() {
        return None;
    }
    let mut last = None;
    for k in 0.. {
        // SAFETY: the array is NULL-terminated and readable up to its terminator.
        let item = unsafe { *config.add(k) };
        if item.is_null() {
            break;
        }
        // SAFETY: a non-NULL entry points to a readable config.
        let item = unsafe { *item };
        if item.option == option {
            last = Some(item);
        }
    }
    last
}

/// The depth asked for by a `contextCreateFromBinary` config array: the last
/// `QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH` wins (as QNN says of repeated options), other
/// options are ignored. `Err(QNN_CONTEXT_ERROR_INVALID_CONFIG)` for a depth type other than
/// numeric, a depth of 0, or one above `execute_async`'s [`MAX_QUEUE_DEPTH`].
///
/// # Safety
/// `config` must be NULL or a NULL-terminated array of pointers to readable configs.
pub unsafe fn queue_depth(config: *const *const QnnContext_Config_t) -> Result<u32, u32> {
    // SAFETY: the caller's contract.
    let asked = unsafe { last_config(config, QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH) }
        // SAFETY: the option says which union member is meant; any bits are valid for two u32.
        .map(|item| unsafe { item.value.asyncExeQueueDepth });
    match asked {
        None => Ok(DEFAULT_QUEUE_DEPTH),
        Some(asked)
            if asked.type_ == QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_NUMERIC
                && (1..=MAX_QUEUE_DEPTH).contains(&asked.depth) =>
        {
            Ok(asked.depth)
        }
        Some(_) => Err(QNN_CONTEXT_ERROR_INVALID_CONFIG),
    }
}

/// The priority of the latest context created (`u64::MAX`: none given), for the tests.
pub static LAST_CONTEXT_PRIORITY: AtomicU64 = AtomicU64::new(u64::MAX);

/// The `QNN_CONTEXT_CONFIG_OPTION_PRIORITY` of a context's configs (the last one given wins), or
/// INVALID_CONFIG (5010) for a value that is not a `Qnn_Priority_t` level.
///
/// # Safety
/// `config` must be NULL or a NULL-terminated array of readable configs.
unsafe fn context_priority(config: *const *const QnnContext_Config_t) -> Result<Option<u32>, u32> {
    // SAFETY: the caller's contract.
    let priority = unsafe { last_config(config, QNN_CONTEXT_CONFIG_OPTION_PRIORITY) }
        // SAFETY: the option says which union member is meant; any bits are a u32.
        .map(|item| unsafe { item.value.priority });
    match priority {
        Some(p)
            if ![
                QNN_PRIORITY_LOW,
                QNN_PRIORITY_NORMAL,
                QNN_PRIORITY_NORMAL_HIGH,
                QNN_PRIORITY_HIGH,
            ]
            .contains(&p) =>
        {
            Err(QNN_CONTEXT_ERROR_INVALID_CONFIG)
        }
        other => Ok(other),
    }
}

/// As for `QnnContext_createFromBinary`.
unsafe fn create_from_binary(
    backend: Qnn_BackendHandle_t,
    device: Qnn_DeviceHandle_t,
    config: *const *const QnnContext_Config_t,
    binary: *const c_void,
    binary_size: u64,
    out: *mut Qnn_ContextHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        let (b, d) = (handle_id(backend), handle_id(device));
        {
            let reg = registry();
            if !reg.has(b, Kind::Backend) {
                return err(QNN_BACKEND_ERROR_INVALID_HANDLE);
            }
            if d != 0 && !reg.has(d, Kind::Device) {
                return err(QNN_DEVICE_ERROR_INVALID_HANDLE);
            }
        }
        if binary.is_null() || binary_size == 0 || binary_size > isize::MAX as u64 || out.is_null()
        {
            return err(QNN_CONTEXT_ERROR_INVALID_ARGUMENT);
        }
        if let Some(code) = knobs().fail_context_create {
            return err(code);
        }
        if let Some(code) = super::ssr::on_create() {
            return code;
        }
        // SAFETY: the caller passes NULL or a NULL-terminated array of readable configs.
        let priority = match unsafe { context_priority(config) } {
            Ok(priority) => priority,
            Err(code) => return err(code),
        };
        LAST_CONTEXT_PRIORITY.store(priority.map_or(u64::MAX, u64::from), Ordering::SeqCst);
        // SAFETY: as above.
        let depth = match unsafe { queue_depth(config) } {
            Ok(depth) => depth,
            Err(code) => return err(code),
        };
        let queue: Arc<dyn ContextQueue> = Arc::new(AsyncQueue::new(depth));
        // SAFETY: non-NULL, and the caller guarantees `binary_size` readable bytes that stay
        // unchanged for the duration of the call; nothing keeps the slice after it.
        let bytes =
            unsafe { std::slice::from_raw_parts(binary.cast::<u8>(), binary_size as usize) };
        let model = match format::decode(bytes) {
            Ok(m) => m,
            Err(FormatError::UnsupportedVersion(_)) => {
                return err(QNN_CONTEXT_ERROR_BINARY_VERSION);
            }
            Err(FormatError::Malformed(_)) => return err(QNN_CONTEXT_ERROR_CREATE_FROM_BINARY),
        };
        let checksum = format::read_header(bytes).unwrap_or(0);
        if let Some(f) = &model.behaviour.fail_context_create
            && f.fires(next_fault_call(checksum, FAULT_CONTEXT_CREATE, ""))
        {
            return err(f.code);
        }
        let model = Arc::new(model);
        let mut reg = registry();
        // Re-check under the same lock as the insertion: the backend may have been freed.
        if !reg.has(b, Kind::Backend) {
            return err(QNN_BACKEND_ERROR_INVALID_HANDLE);
        }
        if d != 0 && !reg.has(d, Kind::Device) {
            return err(QNN_DEVICE_ERROR_INVALID_HANDLE);
        }
        let ctx_id = reg.reserve();
        let dead = Arc::new(AtomicBool::new(false));
        let graphs = (0..model.graphs.len())
            .map(|index| {
                let g = GraphObj {
                    context: ctx_id,
                    device: d,
                    dead: Arc::clone(&dead),
                    model: Arc::clone(&model),
                    index,
                    checksum,
                    running: AtomicU32::new(0),
                    async_running: AtomicU32::new(0),
                    queue: Arc::clone(&queue),
                    calls: AtomicU64::new(0),
                };
                (
                    model.graphs[index].name.clone(),
                    reg.insert(Obj::Graph(Arc::new(g))),
                )
            })
            .collect();
        reg.objects.insert(
            ctx_id,
            Obj::Context(Arc::new(ContextObj {
                backend: b,
                device: d,
                graphs,
                queue,
                dead,
            })),
        );
        // SAFETY: checked non-NULL; caller's out-parameter.
        unsafe { put(out, handle_ptr(ctx_id)) };
        0
    })
}

/// `QnnContext_free`: frees the context and its graph handles. Refused (1005) while a
/// `graphExecute` on one of its graphs is running. Asynchronous executes still queued are
/// answered `QNN_GRAPH_ERROR_INVALID_CONTEXT` (6039) through their notify callbacks, one already
/// running finishes, and the worker thread is joined before this returns.
///
/// # Safety
/// None beyond passing a handle value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnContext_free(
    context: Qnn_ContextHandle_t,
    _profile: Qnn_ProfileHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        let h = handle_id(context);
        let mut reg = registry();
        let Some(Obj::Context(ctx)) = reg.get(h, Kind::Context) else {
            return err(QNN_CONTEXT_ERROR_INVALID_HANDLE);
        };
        let ctx = Arc::clone(ctx);
        let busy = ctx.graphs.iter().any(|(_, g)| {
            matches!(reg.get(*g, Kind::Graph), Some(Obj::Graph(g)) if g.running.load(Ordering::SeqCst) > 0)
        });
        if busy {
            LIFETIME_VIOLATIONS.fetch_add(1, Ordering::SeqCst);
            return err(QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED);
        }
        for (_, g) in &ctx.graphs {
            reg.objects.remove(g);
        }
        reg.objects.remove(&h);
        if super::ssr::is_dead(&ctx.dead) {
            super::ssr::freed_dead();
        }
        // The worker may need the registry (to log) before it can end.
        drop(reg);
        // QNN deregisters what the context still has registered.
        super::mem::free_context(h);
        ctx.queue.close();
        0
    })
}

/// `QnnGraph_retrieve`: the same handle for the same name, until the context is freed.
///
/// # Safety
/// `name` must be NULL or a NUL-terminated string; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnGraph_retrieve(
    context: Qnn_ContextHandle_t,
    name: *const c_char,
    out: *mut Qnn_GraphHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        let reg = registry();
        let Some(Obj::Context(ctx)) = reg.get(handle_id(context), Kind::Context) else {
            return err(QNN_GRAPH_ERROR_INVALID_CONTEXT);
        };
        if super::ssr::is_dead(&ctx.dead) {
            return super::ssr::code();
        }
        if name.is_null() || out.is_null() {
            return err(QNN_GRAPH_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: non-NULL; the caller passes a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(name) };
        let Some((_, g)) = ctx
            .graphs
            .iter()
            .find(|(n, _)| n.as_bytes() == name.to_bytes())
        else {
            return err(QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST);
        };
        // SAFETY: checked non-NULL; caller's out-parameter.
        unsafe { put(out, handle_ptr(*g)) };
        0
    })
}

/// `QnnError_getMessage`: a static message for any code (the handle's low 16 bits).
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnError_getMessage(
    code: Qnn_ErrorHandle_t,
    out: *mut *const c_char,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        let c = error_code(code);
        let name = error_name(c);
        let msg = if name == "QNN_UNKNOWN_ERROR" {
            format!("unknown QNN error code {c} (qnn_sim)")
        } else {
            format!("{name} ({c}) reported by qnn_sim")
        };
        // SAFETY: `put` checks NULL; caller's out-parameter.
        if unsafe { put(out, intern(&msg)) } {
            0
        } else {
            err(QNN_COMMON_ERROR_INVALID_ARGUMENT)
        }
    })
}
