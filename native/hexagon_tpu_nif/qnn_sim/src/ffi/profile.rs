//! `QnnProfile_*`: profile handles and the events an execute records on them.
//!
//! An execute given a profile handle records, at the basic level, the top-level events
//! `EXECUTE` (400, µs), `GRAPH_EXECUTE_HOST_RPC_TIME` (3001, µs), `GRAPH_EXECUTE_ACCEL_TIME_CYCLE`
//! (3003, cycles) and `GRAPH_EXECUTE_ACCEL_TIME_MICROSEC` (3004, µs); at the detailed level also a
//! `NODE` (404) sub-event per op of the graph under 3003 (cycles) and under 3004 (µs), named
//! after the node, plus `VTCM_ACQUIRE_TIME` (3010) and `RESOURCE_POWER_UP_TIME` (3011). Every
//! figure is deterministic ([`node_cycles`]): tests compare them exactly. Each execute replaces
//! the handle's events of the one before. Handles are counted (`QnnSim_profilesCreated`,
//! `QnnSim_profilesLive`), and an execute's profile must be a live handle of this library.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use qnn_sys::*;

use super::state::*;
use crate::model::{GraphDef, Node};

pub static PROFILES_CREATED: AtomicU64 = AtomicU64::new(0);
pub static PROFILES_LIVE: AtomicU64 = AtomicU64::new(0);

/// Handles start here (apart from every other kind's).
const PROFILE_BASE: u64 = 0x7000_0000;
/// Event ids are `handle << 20 | index`.
const EVENT_SHIFT: u32 = 20;

struct SimEvent {
    data: QnnProfile_EventData_t,
    timestamp: u64,
    subs: Vec<u64>,
}

// SAFETY: `identifier` points into the interned string pool, which lives for the process.
unsafe impl Send for SimEvent {}

struct ProfileObj {
    level: u32,
    optrace: bool,
    roots: Vec<u64>,
    events: Vec<SimEvent>,
}

#[derive(Default)]
struct Profiles {
    next: u64,
    live: HashMap<u64, ProfileObj>,
}

static PROFILES: LazyLock<Mutex<Profiles>> = LazyLock::new(Default::default);

/// The cycles the simulated accelerator spends on a node: 500 per op code plus one per element
/// of its first output.
pub fn node_cycles(def: &GraphDef, node: &Node) -> u64 {
    let elements = node
        .outputs
        .first()
        .and_then(|&t| def.tensor(t).spec.element_count())
        .unwrap_or(0) as u64;
    500 * u64::from(node.op.code()) + elements
}

/// Cycles to microseconds at the simulated 1 GHz clock, rounded up.
pub fn cycles_us(cycles: u64) -> u64 {
    cycles.div_ceil(1000)
}

/// Whether `profile` is NULL or a live handle (an execute checks before it runs).
pub fn check_handle(profile: Qnn_ProfileHandle_t) -> Result<(), Qnn_ErrorHandle_t> {
    if profile.is_null() || lock(&PROFILES).live.contains_key(&handle_id(profile)) {
        Ok(())
    } else {
        Err(err(QNN_PROFILE_ERROR_INVALID_HANDLE))
    }
}

/// Records a finished execute of `def` on `profile` (NULL: nothing).
pub fn record_execute(profile: Qnn_ProfileHandle_t, def: &GraphDef) {
    if profile.is_null() {
        return;
    }
    let h = handle_id(profile);
    let mut profiles = lock(&PROFILES);
    let Some(p) = profiles.live.get_mut(&h) else {
        return;
    };
    p.roots.clear();
    p.events.clear();
    let detailed = p.level != QNN_PROFILE_LEVEL_BASIC;
    let push = |p: &mut ProfileObj, kind: u32, unit: u32, value: u64, name: &str| -> u64 {
        let id = (h << EVENT_SHIFT) | p.events.len() as u64;
        p.events.push(SimEvent {
            data: QnnProfile_EventData_t {
                type_: kind,
                unit,
                value,
                identifier: intern(name),
            },
            timestamp: p.events.len() as u64,
            subs: Vec::new(),
        });
        id
    };
    let cycles: Vec<u64> = def.nodes.iter().map(|n| node_cycles(def, n)).collect();
    let total: u64 = cycles.iter().sum();
    let accel_us = cycles_us(total);
    let us = QNN_PROFILE_EVENTUNIT_MICROSEC;
    let execute = push(
        p,
        QNN_PROFILE_EVENTTYPE_EXECUTE,
        us,
        accel_us + 2,
        &def.name,
    );
    let rpc = push(
        p,
        QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_HOST_RPC_TIME_MICROSEC,
        us,
        accel_us + 1,
        "",
    );
    let kind_cycles = QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_CYCLE;
    let accel_cycles = push(p, kind_cycles, QNN_PROFILE_EVENTUNIT_CYCLES, total, "");
    let kind_us = QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_MICROSEC;
    let accel_time = push(p, kind_us, us, accel_us, "");
    p.roots = vec![execute, rpc, accel_cycles, accel_time];
    if detailed {
        for (node, &c) in def.nodes.iter().zip(&cycles) {
            let unit = QNN_PROFILE_EVENTUNIT_CYCLES;
            let sub = push(p, QNN_PROFILE_EVENTTYPE_NODE, unit, c, &node.name);
            p.events[(accel_cycles & 0xF_FFFF) as usize].subs.push(sub);
            let sub = push(p, QNN_PROFILE_EVENTTYPE_NODE, us, cycles_us(c), &node.name);
            p.events[(accel_time & 0xF_FFFF) as usize].subs.push(sub);
        }
        let vtcm = QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_VTCM_ACQUIRE_TIME;
        let power = QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_RESOURCE_POWER_UP_TIME;
        let vtcm = push(p, vtcm, us, 1, "");
        let power = push(p, power, us, 3, "");
        p.roots.extend([vtcm, power]);
    }
    if p.optrace {
        let trace = push(
            p,
            QNN_PROFILE_EVENTTYPE_TRACE,
            QNN_PROFILE_EVENTUNIT_NONE,
            0,
            "optrace",
        );
        p.roots.push(trace);
    }
}

/// Looks an event up: (its profile's handle, its index).
fn event_index(event: u64) -> (u64, usize) {
    (
        event >> EVENT_SHIFT,
        (event & ((1 << EVENT_SHIFT) - 1)) as usize,
    )
}

fn with_event<R>(event: u64, f: impl FnOnce(&SimEvent) -> R) -> Result<R, Qnn_ErrorHandle_t> {
    let (h, index) = event_index(event);
    let profiles = lock(&PROFILES);
    profiles
        .live
        .get(&h)
        .and_then(|p| p.events.get(index))
        .map(f)
        .ok_or_else(|| err(QNN_PROFILE_ERROR_INVALID_HANDLE))
}

/// `QnnProfile_create`: the basic and detailed levels, for a live backend.
///
/// # Safety
/// `out` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnProfile_create(
    backend: Qnn_BackendHandle_t,
    level: u32,
    out: *mut Qnn_ProfileHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if out.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        if !registry().has(handle_id(backend), Kind::Backend) {
            return err(QNN_BACKEND_ERROR_INVALID_HANDLE);
        }
        if level != QNN_PROFILE_LEVEL_BASIC && level != QNN_PROFILE_LEVEL_DETAILED {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        let mut profiles = lock(&PROFILES);
        profiles.next += 1;
        let h = PROFILE_BASE + profiles.next;
        profiles.live.insert(
            h,
            ProfileObj {
                level,
                optrace: false,
                roots: Vec::new(),
                events: Vec::new(),
            },
        );
        PROFILES_CREATED.fetch_add(1, Ordering::SeqCst);
        PROFILES_LIVE.fetch_add(1, Ordering::SeqCst);
        // SAFETY: non-NULL, and the caller's contract makes it writable.
        unsafe { *out = handle_ptr(h) };
        0
    })
}

/// `QnnProfile_setConfig`: `ENABLE_OPTRACE` on a detailed handle (an op trace event is added
/// to each execute's events); anything else is NOT_SUPPORTED.
///
/// # Safety
/// `config` must be NULL or a NULL-terminated array of valid config pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnProfile_setConfig(
    profile: Qnn_ProfileHandle_t,
    config: *const *const QnnProfile_Config_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        let mut profiles = lock(&PROFILES);
        let Some(p) = profiles.live.get_mut(&handle_id(profile)) else {
            return err(QNN_PROFILE_ERROR_INVALID_HANDLE);
        };
        if config.is_null() {
            return 0;
        }
        for i in 0.. {
            // SAFETY: a NULL-terminated array (the caller's contract).
            let entry = unsafe { *config.add(i) };
            if entry.is_null() {
                break;
            }
            // SAFETY: non-NULL entries point to configs.
            let entry = unsafe { &*entry };
            if entry.option != QNN_PROFILE_CONFIG_OPTION_ENABLE_OPTRACE
                || p.level != QNN_PROFILE_LEVEL_DETAILED
            {
                return err(QNN_COMMON_ERROR_NOT_SUPPORTED);
            }
            // SAFETY: the member the option names.
            p.optrace = unsafe { entry.value.enableOptrace } != 0;
        }
        0
    })
}

/// `QnnProfile_getEvents`: the top-level events of the handle's last execute.
///
/// # Safety
/// `events` and `count` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnProfile_getEvents(
    profile: Qnn_ProfileHandle_t,
    events: *mut *const QnnProfile_EventId_t,
    count: *mut u32,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if events.is_null() || count.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        let profiles = lock(&PROFILES);
        let Some(p) = profiles.live.get(&handle_id(profile)) else {
            return err(QNN_PROFILE_ERROR_INVALID_HANDLE);
        };
        // SAFETY: both non-NULL and writable (the caller's contract); the ids stay valid until
        // the next execute on the handle or its free.
        unsafe {
            *events = p.roots.as_ptr();
            *count = p.roots.len() as u32;
        }
        0
    })
}

/// `QnnProfile_getSubEvents`.
///
/// # Safety
/// As [`QnnProfile_getEvents`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnProfile_getSubEvents(
    event: QnnProfile_EventId_t,
    subs: *mut *const QnnProfile_EventId_t,
    count: *mut u32,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if subs.is_null() || count.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        match with_event(event, |e| (e.subs.as_ptr(), e.subs.len() as u32)) {
            Ok((ptr, n)) => {
                // SAFETY: as above.
                unsafe {
                    *subs = ptr;
                    *count = n;
                }
                0
            }
            Err(e) => e,
        }
    })
}

/// `QnnProfile_getEventData`.
///
/// # Safety
/// `data` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnProfile_getEventData(
    event: QnnProfile_EventId_t,
    data: *mut QnnProfile_EventData_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if data.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        match with_event(event, |e| e.data) {
            Ok(d) => {
                // SAFETY: non-NULL and writable (the caller's contract).
                unsafe { *data = d };
                0
            }
            Err(e) => e,
        }
    })
}

/// `QnnProfile_getExtendedEventData`: the same events, the value as a `UINT_64` scalar, with
/// the event's index as its timestamp.
///
/// # Safety
/// `data` must be NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnProfile_getExtendedEventData(
    event: QnnProfile_EventId_t,
    data: *mut QnnProfile_ExtendedEventData_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        if data.is_null() {
            return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
        }
        match with_event(event, |e| (e.data, e.timestamp)) {
            Ok((d, timestamp)) => {
                let mut out = QnnProfile_ExtendedEventData_t::zeroed();
                out.v1.type_ = d.type_;
                out.v1.unit = d.unit;
                out.v1.data = QnnProfile_ExtendedEventValue_t {
                    value: Qnn_Scalar_t {
                        dataType: QNN_DATATYPE_UINT_64,
                        value: Qnn_ScalarValue_t {
                            uint64Value: d.value,
                        },
                    },
                };
                out.v1.timestamp = timestamp;
                out.v1.identifier = d.identifier;
                // SAFETY: non-NULL and writable (the caller's contract).
                unsafe { *data = out };
                0
            }
            Err(e) => e,
        }
    })
}

/// `QnnProfile_free`.
#[unsafe(no_mangle)]
pub extern "C" fn QnnProfile_free(profile: Qnn_ProfileHandle_t) -> Qnn_ErrorHandle_t {
    guard(|| match lock(&PROFILES).live.remove(&handle_id(profile)) {
        Some(_) => {
            PROFILES_LIVE.fetch_sub(1, Ordering::SeqCst);
            0
        }
        None => err(QNN_PROFILE_ERROR_INVALID_HANDLE),
    })
}
