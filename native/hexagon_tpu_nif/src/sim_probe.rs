//! Test support, only with the cargo feature `test-support` (scripts/test.sh; never in a
//! release): qnn_sim's own counters, for the ExUnit suite's leak and serialization checks, and
//! a panic injected into the next executes.

use std::path::Path;

use rustler::{Env, NifMap, Term};

use crate::error::{Done, Failure};

/// qnn_sim's counters.
#[derive(NifMap)]
#[rustler(encode)]
struct SimCountersTerm<'a> {
    live_handles: u64,
    execute_overlaps: u64,
    peak_concurrent_executes: u64,
    execute_count: u64,
    last_context_priority: Option<u64>,
    live_power_config_ids: u64,
    set_power_config_calls: u64,
    last_power_config: LastPowerConfigTerm<'a>,
    profiles_created: u64,
    profiles_live: u64,
    async_in_flight: u64,
    peak_async_in_flight: u64,
    async_notifications: u64,
    ssr_restarts: u64,
    ssr_dead_contexts: u64,
    mem_registrations: u64,
    mem_live_registrations: u64,
    mem_handle_executes: u64,
    mem_stale_uses: u64,
    mem_register_refusals: u64,
}

/// qnn_sim's last accepted `setPowerConfig`: each option's values, `nil` when absent.
#[derive(NifMap)]
#[rustler(encode)]
struct LastPowerConfigTerm<'a> {
    dcvs_v3: Option<Term<'a>>,
    rpc_polling_time: Option<u32>,
    rpc_control_latency: Option<u32>,
}

/// Counters of the qnn_sim library at `path` (Qualcomm's libraries have no such exports): live
/// QNN handles, overlapping executes on one graph, the peak number of executes in flight, and
/// executes entered. `{:ok, map} | {:error, %HexagonTpu.Error{}}`
#[rustler::nif(schedule = "DirtyIo")]
fn qnn_sim_counters<'a>(env: Env<'a>, path: String) -> Result<SimCountersTerm<'a>, Failure> {
    qnn::sim_probe::counters(Path::new(&path))
        .map(|c| SimCountersTerm {
            live_handles: c.live_handles,
            execute_overlaps: c.execute_overlaps,
            peak_concurrent_executes: c.peak_concurrent_executes,
            execute_count: c.execute_count,
            last_context_priority: c.last_context_priority,
            live_power_config_ids: c.live_power_config_ids,
            set_power_config_calls: c.set_power_config_calls,
            last_power_config: LastPowerConfigTerm {
                dcvs_v3: c
                    .last_power_config
                    .dcvs_v3
                    .map(|d| crate::perf::dcvs_map(env, &d)),
                rpc_polling_time: c.last_power_config.rpc_polling_time,
                rpc_control_latency: c.last_power_config.rpc_control_latency,
            },
            profiles_created: c.profiles_created,
            profiles_live: c.profiles_live,
            async_in_flight: c.async_in_flight,
            peak_async_in_flight: c.peak_async_in_flight,
            async_notifications: c.async_notifications,
            ssr_restarts: c.ssr_restarts,
            ssr_dead_contexts: c.ssr_dead_contexts,
            mem_registrations: c.mem_registrations,
            mem_live_registrations: c.mem_live_registrations,
            mem_handle_executes: c.mem_handle_executes,
            mem_stale_uses: c.mem_stale_uses,
            mem_register_refusals: c.mem_register_refusals,
        })
        .map_err(Failure::from)
}

/// Makes the next `count` executes panic inside the `qnn` crate (see
/// `qnn::sim_probe::panic_in_next_executes`). `:ok`
#[rustler::nif]
fn qnn_panic_in_next_executes(count: u64) -> rustler::Atom {
    qnn::sim_probe::panic_in_next_executes(count);
    crate::atoms::ok()
}

/// Sets a knob of the qnn_sim library at `path` (`QnnSim_configure`; use a private copy, the
/// knobs are process-wide). `:ok | {:error, %HexagonTpu.Error{}}`
#[rustler::nif(schedule = "DirtyIo")]
fn qnn_sim_configure(path: String, key: String, value: String) -> Done {
    Done::from(qnn::sim_probe::configure(Path::new(&path), &key, &value))
}
