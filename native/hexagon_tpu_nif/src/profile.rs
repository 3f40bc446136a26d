//! Profiles as terms (`HexagonTpu.Profile` builds its struct from the map), and a graph's
//! sampled profiling: `graph_profile_every` and `graph_profile_table`.

use rustler::NifMap;

use crate::error::{Done, Failure};
use crate::resources::{GraphRes, Handle};

#[derive(NifMap)]
#[rustler(encode)]
struct EventTerm {
    kind: u32,
    name: Option<&'static str>,
    unit: &'static str,
    value: u64,
    identifier: String,
    timestamp_us: Option<u64>,
    sub_events: Vec<EventTerm>,
}

#[derive(NifMap)]
#[rustler(encode)]
struct OpTerm {
    name: String,
    cycles: Option<u64>,
    us: Option<u64>,
}

/// A profile as a map of `HexagonTpu.Profile`'s fields (units and names as strings, which
/// Elixir turns into its fixed atoms).
#[derive(NifMap)]
#[rustler(encode)]
pub struct ProfileTerm {
    level: &'static str,
    sampled: bool,
    execute_us: Option<u64>,
    accelerator_cycles: Option<u64>,
    accelerator_us: Option<u64>,
    host_rpc_us: Option<u64>,
    htp_rpc_us: Option<u64>,
    misc_accelerator_us: Option<u64>,
    resource_power_up_us: Option<u64>,
    vtcm_acquire_us: Option<u64>,
    ops: Vec<OpTerm>,
    events: Vec<EventTerm>,
}

fn event(e: &qnn::profile::Event) -> EventTerm {
    EventTerm {
        kind: e.kind,
        name: e.kind_name(),
        unit: e.unit.name(),
        value: e.value,
        identifier: e.identifier.clone(),
        timestamp_us: e.timestamp_us,
        sub_events: e.sub_events.iter().map(event).collect(),
    }
}

impl From<&qnn::profile::Profile> for ProfileTerm {
    fn from(p: &qnn::profile::Profile) -> Self {
        ProfileTerm {
            level: p.level.name(),
            sampled: p.sampled,
            execute_us: p.execute_us,
            accelerator_cycles: p.accelerator_cycles,
            accelerator_us: p.accelerator_us,
            host_rpc_us: p.host_rpc_us,
            htp_rpc_us: p.htp_rpc_us,
            misc_accelerator_us: p.misc_accelerator_us,
            resource_power_up_us: p.resource_power_up_us,
            vtcm_acquire_us: p.vtcm_acquire_us,
            ops: p
                .ops
                .iter()
                .map(|op| OpTerm {
                    name: op.name.clone(),
                    cycles: op.cycles,
                    us: op.us,
                })
                .collect(),
            events: p.events.iter().map(event).collect(),
        }
    }
}

/// Profiles one execute in `every` (0 stops), creating the graph's detailed handle now.
/// `:ok | {:error, %HexagonTpu.Error{}}`
#[rustler::nif(schedule = "DirtyIo")]
fn graph_profile_every(graph: Handle<GraphRes>, every: u32) -> Done {
    Done::from(graph.0.set_profile_every(Some(every).filter(|&n| n > 0)))
}

#[derive(NifMap)]
#[rustler(encode)]
struct OpRowTerm {
    op: String,
    total_cycles: u64,
    samples: u64,
    max_cycles: u64,
}

#[derive(NifMap)]
#[rustler(encode)]
struct TableTerm {
    every: u32,
    samples: u64,
    ops: Vec<OpRowTerm>,
}

/// The graph's sampled table: `%{every:, samples:, ops: [%{op:, total_cycles:, samples:,
/// max_cycles:}]}`, the ops by total cycles, largest first: always `{:ok, table}`.
#[rustler::nif]
fn graph_profile_table(graph: Handle<GraphRes>) -> Result<TableTerm, Failure> {
    let table = graph.0.profile_table();
    let mut ops: Vec<OpRowTerm> = table
        .ops
        .into_iter()
        .map(|(op, t)| OpRowTerm {
            op,
            total_cycles: t.total_cycles,
            samples: t.samples,
            max_cycles: t.max_cycles,
        })
        .collect();
    ops.sort_by(|a, b| b.total_cycles.cmp(&a.total_cycles).then(a.op.cmp(&b.op)));
    Ok(TableTerm {
        every: table.every,
        samples: table.samples,
        ops,
    })
}
