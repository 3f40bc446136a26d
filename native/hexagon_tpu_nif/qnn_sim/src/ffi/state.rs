//! Process-wide (per library instance) state: knobs, the handle registry, counters.
//!
//! The floor of `ffi`: every other module of it imports this one, and this one imports none of
//! them but `metadata` (a leaf). What it would have to call above itself is composed above it:
//! the knobs other modules own (`null_entries`, the SSR plan) and the resets of their counters
//! in `ffi`'s `configure`, a context's asynchronous queue behind [`ContextQueue`].

use std::any::Any;
use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use qnn_sys::*;

use crate::model::Model;

use super::metadata::MetaArena;

/// Bits OR-ed into every error handle while `error_high_bits` is on (the default), so a
/// caller that compares whole handles instead of `handle & 0xFFFF` fails its tests.
pub const ERROR_HIGH_BITS: u64 = 0x1_0000_0000;

static HIGH_BITS: AtomicBool = AtomicBool::new(true);

/// The error handle for a code (0 stays 0).
pub fn err(code: u32) -> Qnn_ErrorHandle_t {
    if code == 0 {
        0
    } else if HIGH_BITS.load(Ordering::Relaxed) {
        u64::from(code) | ERROR_HIGH_BITS
    } else {
        u64::from(code)
    }
}

/// Runs an export body, turning a panic into `QNN_COMMON_ERROR_GENERAL`.
pub fn guard(f: impl FnOnce() -> Qnn_ErrorHandle_t) -> Qnn_ErrorHandle_t {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| err(QNN_COMMON_ERROR_GENERAL))
}

/// Locks ignoring poisoning (a panic inside an export must not wedge the library).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Leaks one NUL-terminated copy per distinct string; pointers stay valid until unload.
pub fn intern(s: &str) -> *const c_char {
    static POOL: LazyLock<Mutex<HashMap<String, usize>>> = LazyLock::new(Default::default);
    let mut pool = lock(&POOL);
    let addr = *pool.entry(s.to_owned()).or_insert_with(|| {
        let c = CString::new(s.replace('\0', "?")).unwrap_or_default();
        Box::leak(c.into_boxed_c_str()).as_ptr() as usize
    });
    addr as *const c_char
}

// ---------------------------------------------------------------------------------------------
// Knobs

/// Library-wide configuration, set through `QnnSim_configure`.
#[derive(Clone, Debug)]
pub struct Knobs {
    pub core_providers: Vec<Qnn_Version_t>,
    pub system_providers: Vec<Qnn_Version_t>,
    pub null_entries: Vec<String>,
    pub fail_backend_create: Option<u32>,
    pub fail_device_create: Option<u32>,
    pub fail_context_create: Option<u32>,
    pub backend_api: Qnn_Version_t,
    pub backend_id: u32,
    pub provider_name: String,
    pub system_provider_name: String,
    pub build_id: String,
    /// Lines logged (at WARN) through the log callback on every execute.
    pub log_per_execute: u32,
    /// Lines logged (at WARN) verbatim, without qnn_sim's prefix, on every context load: a
    /// backend's start-up chatter, as Qualcomm's emulator logs it.
    pub log_on_load: Vec<String>,
    /// What `deviceGetPlatformInfo` reports; `None` answers NOT_SUPPORTED, as the x86
    /// emulator's backend does.
    pub device_platform: Option<DevicePlatformKnob>,
    /// Milliseconds the asynchronous worker waits before running each queued execute.
    pub async_delay_ms: u32,
    /// While set, asynchronous workers start no queued execute (they stay queued).
    pub async_paused: bool,
    /// While set, a synchronous execute waits inside the backend (after its model's
    /// `sleep_ms`) until it is cleared: tests hold executes in flight by ordering, not time.
    pub execute_paused: bool,
    /// A full asynchronous queue answers `QNN_GRAPH_ERROR_EXECUTION_ASYNC_FIFO_FULL` instead
    /// of blocking the caller (QNN documents blocking).
    pub async_refuse_when_full: bool,
    /// The code every valid `setPowerConfig` answers (a refused performance vote).
    pub refuse_power_config: Option<u32>,
    /// `QnnMem_register` answers `QNN_COMMON_ERROR_NOT_SUPPORTED` before looking at its
    /// arguments, as Qualcomm's x86 emulator does.
    pub mem_register_unsupported: bool,
}

/// The device `deviceGetPlatformInfo` describes: an on-chip HTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePlatformKnob {
    pub soc_model: u32,
    pub htp_arch: u32,
    pub vtcm_mb: usize,
}

/// `soc_model=35,htp_arch=68,vtcm_mb=4` (any order, every key required), or `none`.
fn parse_device_platform(s: &str) -> Option<Option<DevicePlatformKnob>> {
    if s.trim() == "none" {
        return Some(None);
    }
    let (mut soc_model, mut htp_arch, mut vtcm_mb) = (None, None, None);
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=')?;
        let value = value.trim();
        match key.trim() {
            "soc_model" => soc_model = Some(value.parse().ok()?),
            "htp_arch" => htp_arch = Some(value.parse().ok()?),
            "vtcm_mb" => vtcm_mb = Some(value.parse().ok()?),
            _ => return None,
        }
    }
    Some(Some(DevicePlatformKnob {
        soc_model: soc_model?,
        htp_arch: htp_arch?,
        vtcm_mb: vtcm_mb?,
    }))
}

pub const fn v(major: u32, minor: u32, patch: u32) -> Qnn_Version_t {
    Qnn_Version_t {
        major,
        minor,
        patch,
    }
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            core_providers: vec![v(2, 32, 0)],
            system_providers: vec![v(1, 7, 0)],
            null_entries: Vec::new(),
            fail_backend_create: None,
            fail_device_create: None,
            fail_context_create: None,
            backend_api: v(5, 43, 0),
            backend_id: QNN_BACKEND_ID_HTP,
            provider_name: "QNN_SIM".into(),
            system_provider_name: "QNN_SIM_SYSTEM".into(),
            build_id: concat!("qnn_sim v", env!("CARGO_PKG_VERSION"), " (format 1)").into(),
            log_per_execute: 0,
            log_on_load: Vec::new(),
            device_platform: None,
            async_delay_ms: 0,
            async_paused: false,
            execute_paused: false,
            async_refuse_when_full: false,
            refuse_power_config: None,
            mem_register_unsupported: false,
        }
    }
}

impl Knobs {
    /// The core version reported by `backendGetApiVersion` and the binary info: the highest
    /// offered 2.x provider, else the first offered, else 2.32.0.
    pub fn core_api(&self) -> Qnn_Version_t {
        self.core_providers
            .iter()
            .filter(|p| p.major == 2)
            .max_by_key(|p| (p.minor, p.patch))
            .or(self.core_providers.first())
            .copied()
            .unwrap_or(v(2, 32, 0))
    }
}

pub static KNOBS: LazyLock<Mutex<Knobs>> = LazyLock::new(Default::default);
/// Bumped on every configuration change (providers are rebuilt lazily).
pub static KNOBS_GENERATION: AtomicU64 = AtomicU64::new(1);

pub fn knobs() -> Knobs {
    lock(&KNOBS).clone()
}

fn parse_version(s: &str) -> Option<Qnn_Version_t> {
    let mut parts = s.trim().split('.').map(|p| p.trim().parse::<u32>());
    let major = parts.next()?.ok()?;
    let minor = parts.next()?.ok()?;
    let patch = match parts.next() {
        Some(p) => p.ok()?,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    Some(v(major, minor, patch))
}

fn parse_versions(s: &str) -> Option<Vec<Qnn_Version_t>> {
    s.split([';', ','])
        .filter(|p| !p.trim().is_empty())
        .map(parse_version)
        .collect()
}

fn parse_code(s: &str) -> Option<Option<u32>> {
    match s.trim() {
        "" | "none" | "0" => Some(None),
        t => t.parse::<u32>().ok().filter(|&c| c <= 0xFFFF).map(Some),
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.trim() {
        "1" | "true" | "on" => Some(true),
        "0" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// Result codes of `QnnSim_configure`.
pub const CONFIGURE_OK: i32 = 0;
pub const CONFIGURE_UNKNOWN_KEY: i32 = 1;
pub const CONFIGURE_BAD_VALUE: i32 = 2;
pub const CONFIGURE_BAD_ARGUMENT: i32 = 3;

/// Applies one of the knobs this module owns (see the README for the keys), with the knobs'
/// lock held by the caller (`ffi`'s `configure`, which also bumps [`KNOBS_GENERATION`]):
/// `Some(applied)`, or `None` for a key of another module's.
pub fn configure(k: &mut Knobs, key: &str, value: &str) -> Option<bool> {
    let ok = match key {
        "core_providers" => parse_versions(value)
            .map(|p| k.core_providers = p)
            .is_some(),
        "system_providers" => parse_versions(value)
            .map(|p| k.system_providers = p)
            .is_some(),
        "fail_backend_create" => parse_code(value)
            .map(|c| k.fail_backend_create = c)
            .is_some(),
        "fail_device_create" => parse_code(value)
            .map(|c| k.fail_device_create = c)
            .is_some(),
        "refuse_power_config" => parse_code(value)
            .map(|c| k.refuse_power_config = c)
            .is_some(),
        "fail_context_create" => parse_code(value)
            .map(|c| k.fail_context_create = c)
            .is_some(),
        "backend_api" => parse_version(value).map(|x| k.backend_api = x).is_some(),
        "backend_id" => value
            .trim()
            .parse::<u32>()
            .map(|x| k.backend_id = x)
            .is_ok(),
        "provider_name" => {
            k.provider_name = value.to_owned();
            true
        }
        "system_provider_name" => {
            k.system_provider_name = value.to_owned();
            true
        }
        "build_id" => {
            k.build_id = value.to_owned();
            true
        }
        "device_platform" => parse_device_platform(value)
            .map(|p| k.device_platform = p)
            .is_some(),
        "log_per_execute" => value
            .trim()
            .parse::<u32>()
            .map(|x| k.log_per_execute = x)
            .is_ok(),
        "log_on_load" => {
            k.log_on_load = value
                .split('\n')
                .filter(|line| !line.is_empty())
                .map(str::to_owned)
                .collect();
            true
        }
        "async_delay_ms" => value
            .trim()
            .parse::<u32>()
            .map(|x| k.async_delay_ms = x)
            .is_ok(),
        "async_paused" => parse_bool(value).map(|x| k.async_paused = x).is_some(),
        "execute_paused" => parse_bool(value).map(|x| k.execute_paused = x).is_some(),
        "mem_register_unsupported" => parse_bool(value)
            .map(|x| k.mem_register_unsupported = x)
            .is_some(),
        "async_queue_full" => match value.trim() {
            "block" => {
                k.async_refuse_when_full = false;
                true
            }
            "refuse" => {
                k.async_refuse_when_full = true;
                true
            }
            _ => false,
        },
        "error_high_bits" => match value.trim() {
            "1" | "true" | "on" => {
                HIGH_BITS.store(true, Ordering::Relaxed);
                true
            }
            "0" | "false" | "off" => {
                HIGH_BITS.store(false, Ordering::Relaxed);
                true
            }
            _ => false,
        },
        _ => return None,
    };
    Some(ok)
}

/// The `reset` knob's part here: the knobs back to their defaults and this module's counters
/// to zero (the caller holds the knobs' lock and resets the other modules').
pub fn reset(k: &mut Knobs) {
    *k = Knobs::default();
    HIGH_BITS.store(true, Ordering::Relaxed);
    reset_counters();
}

// ---------------------------------------------------------------------------------------------
// Counters

pub static EXECUTE_COUNT: AtomicU64 = AtomicU64::new(0);
pub static EXECUTE_OVERLAPS: AtomicU64 = AtomicU64::new(0);
pub static EXECUTES_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);
pub static PEAK_CONCURRENT_EXECUTES: AtomicU64 = AtomicU64::new(0);
pub static LIFETIME_VIOLATIONS: AtomicU64 = AtomicU64::new(0);

/// Fault call counters with library scope: (model checksum, what, graph name) -> calls.
pub static FAULT_CALLS: LazyLock<Mutex<HashMap<FaultKey, u64>>> = LazyLock::new(Default::default);

/// (model checksum, fault kind, graph name).
pub type FaultKey = (u64, u8, String);

fn reset_counters() {
    for c in [
        &EXECUTE_COUNT,
        &EXECUTE_OVERLAPS,
        &PEAK_CONCURRENT_EXECUTES,
        &LIFETIME_VIOLATIONS,
    ] {
        c.store(0, Ordering::SeqCst);
    }
    lock(&FAULT_CALLS).clear();
}

/// Fault kinds counted with library scope.
pub const FAULT_CONTEXT_CREATE: u8 = 0;
pub const FAULT_EXECUTE: u8 = 1;

/// Counts one call against a library-scoped fault and returns its 0-based number.
pub fn next_fault_call(checksum: u64, what: u8, graph: &str) -> u64 {
    let mut m = lock(&FAULT_CALLS);
    let c = m.entry((checksum, what, graph.to_owned())).or_insert(0);
    let n = *c;
    *c += 1;
    n
}

// ---------------------------------------------------------------------------------------------
// Handle registry

/// A context's asynchronous execution queue, as the registry keeps it. The queue is
/// `execute_async`'s `AsyncQueue`, above this module, which implements this: the registry
/// names only what freeing a context needs, and `execute_async` takes its own type back
/// (`Arc<dyn Any>`'s `downcast`).
pub trait ContextQueue: Any + Send + Sync {
    /// Answers what is still queued and joins the worker (see `AsyncQueue::close`).
    fn close(&self);
}

/// A loaded context.
pub struct ContextObj {
    pub backend: u64,
    pub device: u64,
    pub graphs: Vec<(String, u64)>,
    /// The asynchronous execution queue its graphs share.
    pub queue: Arc<dyn ContextQueue>,
    /// Set by a DSP restart ([`super::ssr`]): every call on it or its graphs is refused.
    pub dead: Arc<AtomicBool>,
}

/// A graph of a loaded context.
pub struct GraphObj {
    pub context: u64,
    /// Its context's device (a restart kills every context of one device).
    pub device: u64,
    /// Its context's [`ContextObj::dead`].
    pub dead: Arc<AtomicBool>,
    pub model: Arc<Model>,
    pub index: usize,
    pub checksum: u64,
    /// `graphExecute`s currently inside this graph (more than one, or one while
    /// `async_running`, is a caller bug).
    pub running: AtomicU32,
    /// Asynchronous executes the context's worker is running on this graph (0 or 1).
    pub async_running: AtomicU32,
    /// The context's asynchronous execution queue.
    pub queue: Arc<dyn ContextQueue>,
    /// Executes counted for a context-scoped fault.
    pub calls: AtomicU64,
}

/// A QnnSystem context and every metadata structure handed out through it.
pub struct SystemObj {
    pub stride: usize,
    pub infos: Vec<MetaArena>,
}

pub enum Obj {
    /// The callback QNN was given (`QnnLog_Callback_t`, or 0 for none) and the most verbose
    /// level it wants.
    Log {
        callback: usize,
        max_level: u32,
    },
    Backend {
        log: u64,
    },
    Device {
        log: u64,
    },
    Context(Arc<ContextObj>),
    Graph(Arc<GraphObj>),
    System(SystemObj),
}

impl Obj {
    pub fn kind(&self) -> Kind {
        match self {
            Obj::Log { .. } => Kind::Log,
            Obj::Backend { .. } => Kind::Backend,
            Obj::Device { .. } => Kind::Device,
            Obj::Context(_) => Kind::Context,
            Obj::Graph(_) => Kind::Graph,
            Obj::System(_) => Kind::System,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Log,
    Backend,
    Device,
    Context,
    Graph,
    System,
}

/// Handles are ids, never addresses: `HANDLE_BASE + n`. A stale, double-freed or wrong-kind
/// handle is simply not found.
pub const HANDLE_BASE: u64 = 0x5153_0000_0000;

pub struct Registry {
    next: u64,
    pub objects: HashMap<u64, Obj>,
}

impl Registry {
    /// A fresh handle value, not yet registered.
    pub fn reserve(&mut self) -> u64 {
        self.next += 1;
        HANDLE_BASE + self.next
    }

    pub fn insert(&mut self, obj: Obj) -> u64 {
        let h = self.reserve();
        self.objects.insert(h, obj);
        h
    }

    pub fn get(&self, h: u64, kind: Kind) -> Option<&Obj> {
        self.objects.get(&h).filter(|o| o.kind() == kind)
    }

    pub fn has(&self, h: u64, kind: Kind) -> bool {
        self.get(h, kind).is_some()
    }

    /// Logs one line through the callback of the log handle that backend `backend` was created
    /// with, as QNN does: `fmt` with its arguments, if `level` is within the handle's level.
    pub fn log(&self, backend: u64, level: u32, line: &std::ffi::CStr) {
        self.log_with(backend, level, c"qnn_sim: %s", line);
    }

    /// As [`Registry::log`], but `line` as it is, without qnn_sim's prefix.
    pub fn log_verbatim(&self, backend: u64, level: u32, line: &std::ffi::CStr) {
        self.log_with(backend, level, c"%s", line);
    }

    fn log_with(&self, backend: u64, level: u32, fmt: &std::ffi::CStr, line: &std::ffi::CStr) {
        let Some(Obj::Backend { log }) = self.get(backend, Kind::Backend) else {
            return;
        };
        if let Some(&Obj::Log {
            callback,
            max_level,
        }) = self.get(*log, Kind::Log)
            && callback != 0
            && level <= max_level
        {
            // SAFETY: `callback` is the non-NULL QnnLog_Callback_t the caller gave
            // QnnLog_create, alive while its log handle is; the format takes one C string.
            unsafe {
                qnn_sim_log(
                    std::mem::transmute::<usize, LogCallback>(callback),
                    level,
                    0,
                    fmt.as_ptr(),
                    line.as_ptr(),
                )
            };
        }
    }

    pub fn live_handles(&self) -> u64 {
        self.objects
            .values()
            .filter(|o| o.kind() != Kind::Graph)
            .count() as u64
    }
}

pub static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| {
    Mutex::new(Registry {
        next: 0,
        objects: HashMap::new(),
    })
});

pub fn registry() -> MutexGuard<'static, Registry> {
    lock(&REGISTRY)
}

pub fn handle_id(p: *mut std::ffi::c_void) -> u64 {
    p as usize as u64
}

pub fn handle_ptr(h: u64) -> *mut std::ffi::c_void {
    h as usize as *mut std::ffi::c_void
}

/// QNN's `QnnLog_Callback_t`; the `va_list` is opaque here (only C makes one).
pub type LogCallback = unsafe extern "C" fn(*const c_char, u32, u64, *mut std::ffi::c_void);

unsafe extern "C" {
    /// src/ffi/log_shim.c: calls `callback(fmt, level, timestamp, <va_list of ...>)`.
    fn qnn_sim_log(callback: LogCallback, level: u32, timestamp: u64, fmt: *const c_char, ...);
}
