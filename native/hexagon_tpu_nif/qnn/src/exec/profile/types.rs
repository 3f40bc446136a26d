//! What a profile holds: its level, events, units, per-op totals and the sampled op table.

use std::collections::BTreeMap;

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
    pub(super) fn index(self) -> usize {
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
    pub(super) fn from_events(level: Level, sampled: bool, events: Vec<Event>) -> Profile {
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
    pub(super) fn add(&mut self, profile: &Profile) {
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
