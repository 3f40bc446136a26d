//! Profiling an execute: a QnnProfile handle attached to `graphExecute`, and what the backend
//! reported read back into a typed [`Profile`].
//!
//! A profile handle belongs to the backend (`QnnProfile_create` takes the backend handle), so it
//! is created and freed on the runtime's owner thread, like the backend itself (ONNX Runtime's
//! QNN EP likewise creates its one profile handle where it creates the backend, and uses it from
//! the threads that run the session). A graph keeps at most one handle per [`Level`], created
//! the first time that level is asked for and reused by every later profiled execute of the
//! graph (only the holder of the graph's turn executes, so a handle is never used twice at
//! once); the events are read right after each execute. The handles are freed, on the owner
//! thread, when the graph is closed or dropped, and not at all once exit has begun.
//!
//! Two ways to profile:
//! - **asked**: [`Turn::execute_profiled`](crate::Turn::execute_profiled) with a level; the
//!   first execute at a level on a graph waits for the runtime's thread to create the handle;
//! - **sampled**: [`Graph::set_profile_every`](crate::Graph::set_profile_every) creates the
//!   detailed handle there and then profiles one execute in N, never waiting for anything, and
//!   adds each sample's per-op cycles to the graph's [`OpTable`].
//!
//! With neither, an execute passes a NULL profile: no handle exists, nothing is read
//! (`profiles_created` in [`mod@crate::counters`] stays where it was).

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::base::error::{Error, Result};
use crate::base::exit;
use crate::base::sync::blocking;
use crate::base::sync::lock;
use crate::exec::runtime::RuntimeCore;
use crate::ffi::loader::BackendLibrary;
use crate::observe::counters;
use crate::observe::trace::{self, Phase};
use crate::sys;

/// How much a profile collects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// `QNN_PROFILE_LEVEL_BASIC`: the execute's totals.
    Basic,
    /// `QNN_PROFILE_LEVEL_DETAILED`: the totals and one event per op.
    Detailed,
    /// A detailed handle with `QNN_PROFILE_CONFIG_OPTION_ENABLE_OPTRACE` set (QNN 2.41 and later
    /// need it explicitly): the backend adds its op trace where it supports one.
    Optrace,
}

impl Level {
    fn index(self) -> usize {
        self as usize
    }

    /// The `QnnProfile_Level_t` the handle is created with.
    pub const fn raw(self) -> sys::QnnProfile_Level_t {
        match self {
            Level::Basic => sys::QNN_PROFILE_LEVEL_BASIC,
            Level::Detailed | Level::Optrace => sys::QNN_PROFILE_LEVEL_DETAILED,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Level::Basic => "basic",
            Level::Detailed => "detailed",
            Level::Optrace => "optrace",
        }
    }
}

/// An event's unit (`QnnProfile_EventUnit_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Microseconds,
    Bytes,
    Cycles,
    Count,
    /// A backend object (a file, for an op trace); the value is its size in bytes.
    Object,
    None,
    /// A unit this crate does not know, as the backend gave it.
    Other(u32),
}

impl Unit {
    pub fn from_raw(raw: u32) -> Unit {
        match raw {
            sys::QNN_PROFILE_EVENTUNIT_MICROSEC => Unit::Microseconds,
            sys::QNN_PROFILE_EVENTUNIT_BYTES => Unit::Bytes,
            sys::QNN_PROFILE_EVENTUNIT_CYCLES => Unit::Cycles,
            sys::QNN_PROFILE_EVENTUNIT_COUNT => Unit::Count,
            sys::QNN_PROFILE_EVENTUNIT_OBJECT => Unit::Object,
            sys::QNN_PROFILE_EVENTUNIT_NONE => Unit::None,
            other => Unit::Other(other),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Unit::Microseconds => "us",
            Unit::Bytes => "bytes",
            Unit::Cycles => "cycles",
            Unit::Count => "count",
            Unit::Object => "object",
            Unit::None => "none",
            Unit::Other(_) => "other",
        }
    }
}

/// The name of an event type of `QnnProfile.h` or `HTP/QnnHtpProfile.h` that an execute reports,
/// or `None` for one this crate does not name.
pub fn event_type_name(kind: u32) -> Option<&'static str> {
    Some(match kind {
        sys::QNN_PROFILE_EVENTTYPE_INIT => "init",
        sys::QNN_PROFILE_EVENTTYPE_FINALIZE => "finalize",
        sys::QNN_PROFILE_EVENTTYPE_EXECUTE => "execute",
        sys::QNN_PROFILE_EVENTTYPE_NODE => "node",
        sys::QNN_PROFILE_EVENTTYPE_EXECUTE_QUEUE_WAIT => "execute_queue_wait",
        sys::QNN_PROFILE_EVENTTYPE_EXECUTE_PREPROCESS => "execute_preprocess",
        sys::QNN_PROFILE_EVENTTYPE_EXECUTE_DEVICE => "execute_device",
        sys::QNN_PROFILE_EVENTTYPE_EXECUTE_POSTPROCESS => "execute_postprocess",
        sys::QNN_PROFILE_EVENTTYPE_DEINIT => "deinit",
        sys::QNN_PROFILE_EVENTTYPE_TRACE => "trace",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_HOST_RPC_TIME_MICROSEC => "host_rpc",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_HTP_RPC_TIME_MICROSEC => "htp_rpc",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_CYCLE => "accelerator_cycles",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_MICROSEC => "accelerator_us",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_MISC_ACCEL_TIME_MICROSEC => "misc_accelerator",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_YIELD_INSTANCE_RELEASE_TIME => "yield_release",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_YIELD_INSTANCE_WAIT_TIME => "yield_wait",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_YIELD_INSTANCE_RESTORE_TIME => "yield_restore",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_YIELD_COUNT => "yield_count",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_VTCM_ACQUIRE_TIME => "vtcm_acquire",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_RESOURCE_POWER_UP_TIME => "resource_power_up",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_EXCL_WAIT_TIME_MICROSEC => {
            "accelerator_excluding_wait"
        }
        sys::QNN_HTP_PROFILE_EVENTTYPE_NODE_WAIT => "node_wait",
        sys::QNN_HTP_PROFILE_EVENTTYPE_NODE_OVERLAP => "node_overlap",
        sys::QNN_HTP_PROFILE_EVENTTYPE_NODE_WAIT_OVERLAP => "node_wait_overlap",
        sys::QNN_HTP_PROFILE_EVENTTYPE_NODE_RESOURCEMASK => "node_resource_mask",
        sys::QNN_HTP_PROFILE_EVENTTYPE_NODE_CRITICAL_BG_OP_ID => "node_critical_bg_op",
        sys::QNN_HTP_PROFILE_EVENTTYPE_NODE_WAIT_BG_OP_ID => "node_wait_bg_op",
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_CRITICAL_ACCEL_TIME_CYCLE => {
            "critical_path_cycles"
        }
        sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_NUMBER_OF_HVX_THREADS => "hvx_threads",
        _ => return None,
    })
}

/// One event as the backend reported it, with its sub-events.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// `QnnProfile_EventType_t`; see [`event_type_name`].
    pub kind: u32,
    pub unit: Unit,
    pub value: u64,
    /// The backend's name for it: the op's name for a node event.
    pub identifier: String,
    /// Microseconds, from the extended event data where the backend has it.
    pub timestamp_us: Option<u64>,
    pub sub_events: Vec<Event>,
}

impl Event {
    /// The event's name if [`event_type_name`] knows its type.
    pub fn kind_name(&self) -> Option<&'static str> {
        event_type_name(self.kind)
    }
}

/// One op of the graph in a detailed profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpProfile {
    /// The node event's identifier without the unit the HTP appends ([`op_name`]).
    pub name: String,
    /// Accelerator cycles (the node event under the execute's cycles event).
    pub cycles: Option<u64>,
    /// Microseconds (the node event under the execute's microseconds event).
    pub us: Option<u64>,
}

/// What the backend reported about one execute, typed. A figure the backend did not report is
/// `None` (the emulator, for instance, reports no VTCM or power-up times).
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub level: Level,
    /// Whether the execute was profiled because of the graph's `profile_every`.
    pub sampled: bool,
    /// `QNN_PROFILE_EVENTTYPE_EXECUTE`: the whole execute, in the backend's unit (µs).
    pub execute_us: Option<u64>,
    pub accelerator_cycles: Option<u64>,
    pub accelerator_us: Option<u64>,
    pub host_rpc_us: Option<u64>,
    pub htp_rpc_us: Option<u64>,
    pub misc_accelerator_us: Option<u64>,
    /// Waiting for HVX and HMX and turning them on (`RESOURCE_POWER_UP_TIME`).
    pub resource_power_up_us: Option<u64>,
    pub vtcm_acquire_us: Option<u64>,
    /// Per op, in the order the backend reported them (detailed levels only).
    pub ops: Vec<OpProfile>,
    /// Every event, as reported (top level first, sub-events nested).
    pub events: Vec<Event>,
}

impl Profile {
    fn from_events(level: Level, sampled: bool, events: Vec<Event>) -> Profile {
        let mut profile = Profile {
            level,
            sampled,
            execute_us: None,
            accelerator_cycles: None,
            accelerator_us: None,
            host_rpc_us: None,
            htp_rpc_us: None,
            misc_accelerator_us: None,
            resource_power_up_us: None,
            vtcm_acquire_us: None,
            ops: Vec::new(),
            events: Vec::new(),
        };
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        fn walk(
            profile: &mut Profile,
            index: &mut BTreeMap<String, usize>,
            events: &[Event],
            in_node_parent: bool,
        ) {
            for event in events {
                let slot = match event.kind {
                    sys::QNN_PROFILE_EVENTTYPE_EXECUTE => Some(&mut profile.execute_us),
                    sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_CYCLE => {
                        Some(&mut profile.accelerator_cycles)
                    }
                    sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_MICROSEC => {
                        Some(&mut profile.accelerator_us)
                    }
                    sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_HOST_RPC_TIME_MICROSEC => {
                        Some(&mut profile.host_rpc_us)
                    }
                    sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_HTP_RPC_TIME_MICROSEC => {
                        Some(&mut profile.htp_rpc_us)
                    }
                    sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_MISC_ACCEL_TIME_MICROSEC => {
                        Some(&mut profile.misc_accelerator_us)
                    }
                    sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_RESOURCE_POWER_UP_TIME => {
                        Some(&mut profile.resource_power_up_us)
                    }
                    sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_VTCM_ACQUIRE_TIME => {
                        Some(&mut profile.vtcm_acquire_us)
                    }
                    _ => None,
                };
                if let Some(slot) = slot {
                    slot.get_or_insert(event.value);
                }
                if event.kind == sys::QNN_PROFILE_EVENTTYPE_NODE && in_node_parent {
                    let name = op_name(&event.identifier);
                    let at = *index.entry(name.to_string()).or_insert_with(|| {
                        profile.ops.push(OpProfile {
                            name: name.to_string(),
                            cycles: None,
                            us: None,
                        });
                        profile.ops.len() - 1
                    });
                    let op = &mut profile.ops[at];
                    match event.unit {
                        Unit::Cycles => {
                            op.cycles.get_or_insert(event.value);
                        }
                        Unit::Microseconds => {
                            op.us.get_or_insert(event.value);
                        }
                        _ => {}
                    }
                }
                // Node events are the per-op children of the execute's cycles and microseconds
                // events (other parents' node children, e.g. a linting level's, are left out).
                let parent_of_nodes = matches!(
                    event.kind,
                    sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_CYCLE
                        | sys::QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_MICROSEC
                        | sys::QNN_PROFILE_EVENTTYPE_EXECUTE
                );
                walk(profile, index, &event.sub_events, parent_of_nodes);
            }
        }
        walk(&mut profile, &mut index, &events, false);
        profile.events = events;
        profile
    }
}

/// An op's name from its node event's identifier: the HTP appends the unit (`"n0_token_1:OpId_25
/// (cycles)"`), which the name leaves out (`"n0_token_1:OpId_25"`: QNN's node name, then the op's
/// id in the compiled graph).
pub fn op_name(identifier: &str) -> &str {
    [" (cycles)", " (us)", " (microsec)"]
        .iter()
        .find_map(|suffix| identifier.strip_suffix(suffix))
        .unwrap_or(identifier)
}

/// One op's row of a graph's sampled table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTotals {
    pub total_cycles: u64,
    pub samples: u64,
    pub max_cycles: u64,
}

/// A graph's sampled per-op cycles: op name → totals, and how many executes were sampled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpTable {
    pub every: u32,
    pub samples: u64,
    pub ops: BTreeMap<String, OpTotals>,
}

impl OpTable {
    fn add(&mut self, profile: &Profile) {
        self.samples += 1;
        for op in &profile.ops {
            if let Some(cycles) = op.cycles {
                let row = self.ops.entry(op.name.clone()).or_default();
                row.total_cycles = row.total_cycles.saturating_add(cycles);
                row.samples += 1;
                row.max_cycles = row.max_cycles.max(cycles);
            }
        }
    }
}

/// The QnnProfile entries of a backend's table. The four the runtime cannot do without decide
/// whether the library can profile at all.
#[derive(Clone, Copy)]
pub(crate) struct ProfileFns {
    create: sys::QnnProfile_CreateFn,
    set_config: Option<sys::QnnProfile_SetConfigFn>,
    get_events: sys::QnnProfile_GetEventsFn,
    get_sub_events: sys::QnnProfile_GetSubEventsFn,
    get_event_data: sys::QnnProfile_GetEventDataFn,
    get_extended_event_data: Option<sys::QnnProfile_GetExtendedEventDataFn>,
    free: sys::QnnProfile_FreeFn,
}

type Entries3<A, B, C> = (Option<A>, Option<B>, Option<C>);

impl ProfileFns {
    pub(crate) fn from_entries(
        (create, set_config, get_events): Entries3<
            sys::QnnProfile_CreateFn,
            sys::QnnProfile_SetConfigFn,
            sys::QnnProfile_GetEventsFn,
        >,
        (get_sub_events, get_event_data): (
            Option<sys::QnnProfile_GetSubEventsFn>,
            Option<sys::QnnProfile_GetEventDataFn>,
        ),
        (get_extended_event_data, free): (
            Option<sys::QnnProfile_GetExtendedEventDataFn>,
            Option<sys::QnnProfile_FreeFn>,
        ),
    ) -> Option<ProfileFns> {
        Some(ProfileFns {
            create: create?,
            set_config,
            get_events: get_events?,
            get_sub_events: get_sub_events?,
            get_event_data: get_event_data?,
            get_extended_event_data,
            free: free?,
        })
    }
}

fn fns(lib: &BackendLibrary) -> Result<ProfileFns> {
    lib.fns.profile.ok_or_else(|| Error::InvalidInput {
        message: format!(
            "profile: the backend {} has no QnnProfile functions",
            lib.path.display()
        ),
    })
}

/// The raw handle, sent to and from the owner thread.
struct Raw(sys::Qnn_ProfileHandle_t);
// SAFETY: a profile handle is an opaque token of the backend; this crate uses each from one
// thread at a time (creation and free on the owner thread, executes under the graph's turn).
unsafe impl Send for Raw {}

/// A live profile handle; freed on the runtime's owner thread when dropped.
struct Handle {
    raw: Raw,
    runtime: Arc<RuntimeCore>,
    /// Read events through `profileGetExtendedEventData` (the library says it has it).
    extended: bool,
}

impl Handle {
    /// Creates a handle at `level` on the runtime's owner thread, waiting for it.
    fn create(runtime: &Arc<RuntimeCore>, level: Level) -> Result<Handle> {
        let lib = Arc::clone(&runtime.backend_lib);
        let fns = fns(&lib)?;
        let raw = blocking(|done| {
            runtime.owner.run(Box::new(move |handles| {
                done(create_on_owner(&handles.lib, fns, handles.backend, level).map(Raw));
            }))
        })?;
        let extended = fns.get_extended_event_data.is_some()
            && lib.has_capability(sys::QNN_PROPERTY_PROFILE_SUPPORTS_EXTENDED_EVENT);
        Ok(Handle {
            raw,
            runtime: Arc::clone(runtime),
            extended,
        })
    }

    /// Reads every event of the last call the handle was attached to.
    fn read(&self, level: Level, sampled: bool) -> Result<Profile> {
        let lib = &self.runtime.backend_lib;
        let fns = fns(lib)?;
        let _in_qnn = exit::enter()?;
        let mut ids: *const sys::QnnProfile_EventId_t = std::ptr::null();
        let mut count = 0u32;
        // SAFETY: the handle is live (owned by `self`) and not in use by another call (the
        // caller holds the graph's turn); both out-pointers are writable.
        let status = sys::Status(unsafe { (fns.get_events)(self.raw.0, &mut ids, &mut count) });
        lib.check("profileGetEvents", status)?;
        // SAFETY: QNN returned `count` ids at `ids`, valid until the handle is freed.
        let ids = unsafe { id_slice(ids, count, "profileGetEvents")? };
        let mut reader = Reader {
            lib,
            fns,
            extended: self.extended,
            events: 0,
        };
        let events = ids
            .iter()
            .map(|&id| reader.event(id, 0))
            .collect::<Result<Vec<_>>>()?;
        Ok(Profile::from_events(level, sampled, events))
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let raw = Raw(std::mem::replace(&mut self.raw.0, std::ptr::null_mut()));
        if raw.0.is_null() {
            return;
        }
        let Some(fns) = self.runtime.backend_lib.fns.profile else {
            return;
        };
        // Freed where it was made. Never waits: the owner thread runs it after the jobs before
        // it, and before it frees the backend (which waits for every holder of the runtime).
        self.runtime.owner.run(Box::new(move |handles| {
            let raw = raw;
            let Ok(_in_qnn) = exit::enter() else {
                // Exit has begun: the process's end reclaims it.
                return;
            };
            // SAFETY: the handle was created by this library on this thread and is attached to
            // no call (its graph's executes are over: the graph is closed or dropped); it is
            // freed once, here.
            let status = sys::Status(unsafe { (fns.free)(raw.0) });
            if handles.lib.check("profileFree", status).is_err() {
                counters::record_release_error();
            }
            counters::record_profile_handle(false);
        }));
    }
}

/// `profileCreate` (and, for the optrace level, `profileSetConfig`), on the owner thread.
fn create_on_owner(
    lib: &BackendLibrary,
    fns: ProfileFns,
    backend: sys::Qnn_BackendHandle_t,
    level: Level,
) -> Result<sys::Qnn_ProfileHandle_t> {
    let _in_qnn = exit::enter()?;
    let mut raw: sys::Qnn_ProfileHandle_t = std::ptr::null_mut();
    // SAFETY: the backend handle is live on this, its owner thread; the out-pointer is writable.
    let status = sys::Status(unsafe { (fns.create)(backend, level.raw(), &mut raw) });
    lib.check("profileCreate", status)?;
    if raw.is_null() {
        return Err(Error::Internal {
            message: "profileCreate returned a NULL handle".into(),
        });
    }
    counters::record_profile_handle(true);
    if level == Level::Optrace {
        let enabled = match fns.set_config {
            None => Err(Error::InvalidInput {
                message: format!(
                    "profile: :optrace needs profileSetConfig, which the backend {} lacks",
                    lib.path.display()
                ),
            }),
            Some(set_config) => {
                let config = sys::QnnProfile_Config_t {
                    option: sys::QNN_PROFILE_CONFIG_OPTION_ENABLE_OPTRACE,
                    value: sys::QnnProfile_ConfigValue_t { enableOptrace: 1 },
                };
                let list = [&raw const config, std::ptr::null()];
                // SAFETY: a live handle attached to no call; a NULL-terminated list of one
                // config that outlives the call.
                let status = sys::Status(unsafe { set_config(raw, list.as_ptr()) });
                lib.check("profileSetConfig (enableOptrace)", status)
            }
        };
        if let Err(error) = enabled {
            // SAFETY: created just above on this thread, attached to nothing; freed once.
            let _ = sys::Status(unsafe { (fns.free)(raw) });
            counters::record_profile_handle(false);
            return Err(error);
        }
    }
    Ok(raw)
}

/// The most events read from one profile, and the deepest nesting: a backend's answer beyond
/// them is refused rather than followed.
const MAX_EVENTS: usize = 1 << 16;
const MAX_DEPTH: usize = 8;
/// Identifiers longer than this are cut.
const MAX_IDENTIFIER: usize = 1024;

/// # Safety
/// `ids` must point to `count` ids (or `count` be 0).
unsafe fn id_slice<'a>(
    ids: *const sys::QnnProfile_EventId_t,
    count: u32,
    op: &str,
) -> Result<&'a [sys::QnnProfile_EventId_t]> {
    if count == 0 {
        return Ok(&[]);
    }
    if ids.is_null() || count as usize > MAX_EVENTS {
        return Err(Error::Internal {
            message: format!("{op} returned {count} events at {ids:?}"),
        });
    }
    // SAFETY: the caller's contract, checked non-NULL above.
    Ok(unsafe { std::slice::from_raw_parts(ids, count as usize) })
}

struct Reader<'a> {
    lib: &'a BackendLibrary,
    fns: ProfileFns,
    extended: bool,
    events: usize,
}

impl Reader<'_> {
    fn event(&mut self, id: sys::QnnProfile_EventId_t, depth: usize) -> Result<Event> {
        self.events += 1;
        if self.events > MAX_EVENTS || depth > MAX_DEPTH {
            return Err(Error::Internal {
                message: format!(
                    "the profile has more than {MAX_EVENTS} events or is nested deeper than \
                     {MAX_DEPTH}"
                ),
            });
        }
        let mut event = self.data(id)?;
        let mut subs: *const sys::QnnProfile_EventId_t = std::ptr::null();
        let mut count = 0u32;
        // SAFETY: `id` is an event of a live handle; out-pointers writable.
        let status = sys::Status(unsafe { (self.fns.get_sub_events)(id, &mut subs, &mut count) });
        self.lib.check("profileGetSubEvents", status)?;
        // SAFETY: QNN returned `count` ids at `subs`, valid until the handle is freed.
        let subs = unsafe { id_slice(subs, count, "profileGetSubEvents")? };
        event.sub_events = subs
            .iter()
            .map(|&sub| self.event(sub, depth + 1))
            .collect::<Result<Vec<_>>>()?;
        Ok(event)
    }

    fn data(&self, id: sys::QnnProfile_EventId_t) -> Result<Event> {
        if let (true, Some(get)) = (self.extended, self.fns.get_extended_event_data) {
            let mut data = sys::QnnProfile_ExtendedEventData_t::zeroed();
            // SAFETY: `id` is an event of a live handle; `data` is writable.
            let status = sys::Status(unsafe { get(id, &mut data) });
            self.lib.check("profileGetExtendedEventData", status)?;
            if data.version == sys::QNN_PROFILE_DATA_VERSION_1 {
                let v1 = data.v1;
                let unit = Unit::from_raw(v1.unit);
                let value = match unit {
                    // SAFETY: OBJECT events hold the opaque object.
                    Unit::Object => unsafe { v1.data.backendOpaqueObject.opaqueObject.len },
                    // SAFETY: every other unit holds the scalar.
                    _ => scalar_u64(unsafe { v1.data.value }),
                };
                return Ok(Event {
                    kind: v1.type_,
                    unit,
                    value,
                    // SAFETY: NULL or a string of the live handle.
                    identifier: unsafe { identifier(v1.identifier) },
                    timestamp_us: Some(v1.timestamp),
                    sub_events: Vec::new(),
                });
            }
        }
        let mut data = sys::QnnProfile_EventData_t::default();
        // SAFETY: as above.
        let status = sys::Status(unsafe { (self.fns.get_event_data)(id, &mut data) });
        self.lib.check("profileGetEventData", status)?;
        Ok(Event {
            kind: data.type_,
            unit: Unit::from_raw(data.unit),
            value: data.value,
            // SAFETY: NULL or a string of the live handle.
            identifier: unsafe { identifier(data.identifier) },
            timestamp_us: None,
            sub_events: Vec::new(),
        })
    }
}

/// A scalar's value as an integer (floats truncated, negatives as 0).
fn scalar_u64(scalar: sys::Qnn_Scalar_t) -> u64 {
    // SAFETY: each arm reads the member `dataType` names.
    unsafe {
        match scalar.dataType {
            sys::QNN_DATATYPE_UINT_64 => scalar.value.uint64Value,
            sys::QNN_DATATYPE_INT_64 => scalar.value.int64Value.max(0) as u64,
            sys::QNN_DATATYPE_UINT_32 => u64::from(scalar.value.uint32Value),
            sys::QNN_DATATYPE_INT_32 => scalar.value.int32Value.max(0) as u64,
            sys::QNN_DATATYPE_UINT_16 => u64::from(scalar.value.uint16Value),
            sys::QNN_DATATYPE_INT_16 => scalar.value.int16Value.max(0) as u64,
            sys::QNN_DATATYPE_UINT_8 | sys::QNN_DATATYPE_BOOL_8 => {
                u64::from(scalar.value.uint8Value)
            }
            sys::QNN_DATATYPE_INT_8 => scalar.value.int8Value.max(0) as u64,
            sys::QNN_DATATYPE_FLOAT_32 => scalar.value.floatValue.max(0.0) as u64,
            sys::QNN_DATATYPE_FLOAT_64 => scalar.value.doubleValue.max(0.0) as u64,
            _ => scalar.value.uint64Value,
        }
    }
}

/// # Safety
/// `text` must be NULL or a NUL-terminated string.
unsafe fn identifier(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { CStr::from_ptr(text) }.to_bytes();
    String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_IDENTIFIER)]).into_owned()
}

/// A graph's profiling: its handles, the sampling interval and the sampled table. The handles
/// are used only by the holder of the graph's turn, so their lock is never contended.
#[derive(Default)]
pub(crate) struct Profiler {
    /// One handle per level, made the first time the level is used.
    handles: Mutex<[Option<Handle>; 3]>,
    /// Profile one execute in this many (0: never).
    every: AtomicU32,
    /// Executes counted for sampling.
    executes: AtomicU64,
    table: Mutex<OpTable>,
}

/// A profile attached to one execute.
pub(crate) struct Active<'p> {
    handles: MutexGuard<'p, [Option<Handle>; 3]>,
    level: Level,
    sampled: bool,
}

impl Active<'_> {
    pub(crate) fn raw(&self) -> sys::Qnn_ProfileHandle_t {
        self.handles[self.level.index()]
            .as_ref()
            .map_or(std::ptr::null_mut(), |h| h.raw.0)
    }
}

impl Profiler {
    /// Profiles one execute in `every` (`None`: stops sampling); creates the detailed handle
    /// now, on the runtime's thread, so that no sampled execute waits for it. The table starts
    /// again empty.
    pub(crate) fn sample_every(
        &self,
        runtime: &Arc<RuntimeCore>,
        every: Option<u32>,
    ) -> Result<()> {
        let every = every.unwrap_or(0);
        if every > 0 {
            self.handle(runtime, Level::Detailed)?;
        }
        *lock(&self.table) = OpTable {
            every,
            ..OpTable::default()
        };
        self.executes.store(0, Relaxed);
        self.every.store(every, Relaxed);
        Ok(())
    }

    /// Creates the handle of `level` if the graph has none yet.
    fn handle(&self, runtime: &Arc<RuntimeCore>, level: Level) -> Result<()> {
        let mut handles = lock(&self.handles);
        if handles[level.index()].is_none() {
            handles[level.index()] = Some(Handle::create(runtime, level)?);
        }
        Ok(())
    }

    /// What the coming execute collects, if anything: the level `asked` (creating its handle if
    /// need be), or a sample when it is the graph's turn for one. With neither, one load.
    pub(crate) fn begin(
        &self,
        runtime: &Arc<RuntimeCore>,
        asked: Option<Level>,
    ) -> Result<Option<Active<'_>>> {
        let every = self.every.load(Relaxed);
        let (level, sampled) = match asked {
            Some(level) => (level, false),
            None if every > 0 => {
                let n = self.executes.fetch_add(1, Relaxed);
                if !n.is_multiple_of(u64::from(every)) {
                    return Ok(None);
                }
                (Level::Detailed, true)
            }
            None => return Ok(None),
        };
        if !sampled {
            self.handle(runtime, level)?;
        }
        let handles = lock(&self.handles);
        if handles[level.index()].is_none() {
            // Sampling was turned on elsewhere without a handle (closed meanwhile): skip.
            return Ok(None);
        }
        Ok(Some(Active {
            handles,
            level,
            sampled,
        }))
    }

    /// Reads the profile of the execute that just succeeded with `active`. A sample is added
    /// to the table; a sample whose events cannot be read is counted and dropped (`None`). An
    /// asked-for profile that cannot be read is the execute's error.
    /// `started` and `execute_ns` are the `graphExecute` call's, for the trace's op spans.
    pub(crate) fn finish(
        &self,
        active: Active<'_>,
        started: Instant,
        execute_ns: u64,
    ) -> Result<Option<Profile>> {
        let Some(handle) = active.handles[active.level.index()].as_ref() else {
            return Ok(None);
        };
        let read = handle.read(active.level, active.sampled);
        drop(active.handles);
        match (read, active.sampled) {
            (Ok(profile), sampled) => {
                if trace::is_on() {
                    trace_ops(&profile, started, execute_ns);
                }
                if sampled {
                    counters::record_profile_sample(false);
                    lock(&self.table).add(&profile);
                }
                Ok(Some(profile))
            }
            (Err(_), true) => {
                counters::record_profile_sample(true);
                Ok(None)
            }
            (Err(error), false) => Err(error),
        }
    }

    /// A copy of the sampled table.
    pub(crate) fn table(&self) -> OpTable {
        lock(&self.table).clone()
    }

    /// Frees the handles (on the owner thread) and stops sampling: the graph is closing.
    pub(crate) fn close(&self) {
        self.every.store(0, Relaxed);
        let handles = std::mem::take(&mut *lock(&self.handles));
        drop(handles);
    }
}

/// Records each op of `profile` in the trace, inside the `graphExecute` call that began at
/// `started` and took `execute_ns`. Ops that report microseconds take them; otherwise (the HTP
/// reports cycles only) the accelerator's time, or the call's, is shared among the ops by their
/// cycles. Either way the ops are laid end to end in the order the backend reported them, from
/// the call's start: the backend gives no op a start time, so the layout shows each op's share,
/// not when it ran.
fn trace_ops(profile: &Profile, started: Instant, execute_ns: u64) {
    let total_cycles: u64 = profile.ops.iter().filter_map(|op| op.cycles).sum();
    let window_ns = profile
        .accelerator_us
        .map_or(execute_ns, |us| us.saturating_mul(1_000).min(execute_ns));
    let mut offset_ns = 0u64;
    for op in &profile.ops {
        let duration_ns = match (op.us, op.cycles) {
            (Some(us), _) => us.saturating_mul(1_000),
            (None, Some(cycles)) if total_cycles > 0 => {
                (u128::from(window_ns) * u128::from(cycles) / u128::from(total_cycles)) as u64
            }
            _ => 0,
        };
        trace::record(Phase::Op, &op.name, started, offset_ns, duration_ns);
        offset_ns = offset_ns.saturating_add(duration_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: u32, unit: u32, value: u64, identifier: &str, subs: Vec<Event>) -> Event {
        Event {
            kind,
            unit: Unit::from_raw(unit),
            value,
            identifier: identifier.into(),
            timestamp_us: None,
            sub_events: subs,
        }
    }

    #[test]
    fn a_detailed_profile_is_typed() {
        let node = |name, unit, value| event(404, unit, value, name, vec![]);
        assert_eq!(op_name("n0_token_1:OpId_25 (cycles)"), "n0_token_1:OpId_25");
        assert_eq!(op_name("Input OpId_2"), "Input OpId_2");
        let events = vec![
            event(400, 1, 900, "", vec![]),
            event(3001, 1, 800, "", vec![]),
            event(
                3003,
                3,
                5000,
                "",
                vec![node("conv", 3, 3000), node("relu", 3, 2000)],
            ),
            event(3004, 1, 5, "", vec![node("conv", 1, 3), node("relu", 1, 2)]),
            event(3010, 1, 7, "", vec![]),
        ];
        let p = Profile::from_events(Level::Detailed, false, events);
        assert_eq!(p.execute_us, Some(900));
        assert_eq!(p.host_rpc_us, Some(800));
        assert_eq!(p.accelerator_cycles, Some(5000));
        assert_eq!(p.accelerator_us, Some(5));
        assert_eq!(p.vtcm_acquire_us, Some(7));
        assert_eq!(p.resource_power_up_us, None);
        assert_eq!(
            p.ops,
            vec![
                OpProfile {
                    name: "conv".into(),
                    cycles: Some(3000),
                    us: Some(3)
                },
                OpProfile {
                    name: "relu".into(),
                    cycles: Some(2000),
                    us: Some(2)
                },
            ]
        );
        let mut table = OpTable::default();
        table.add(&p);
        table.add(&p);
        assert_eq!(table.samples, 2);
        assert_eq!(
            table.ops["conv"],
            OpTotals {
                total_cycles: 6000,
                samples: 2,
                max_cycles: 3000
            }
        );
    }
}
