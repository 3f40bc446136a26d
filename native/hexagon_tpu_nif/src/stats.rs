//! Native counters and the host backend's counters (test support).

use std::path::Path;

use rustler::{Atom, Env, NifMap, Term};

use crate::atoms;
use crate::error::{Failure, ok_or_error};

/// Every counter `qnn::counters()` keeps, as a map with the names `HexagonTpu.Stats` documents.
#[derive(NifMap)]
#[rustler(encode)]
struct CountersTerm {
    runtimes_alive: u64,
    contexts_alive: u64,
    graphs_alive: u64,
    runtimes_created: u64,
    contexts_created: u64,
    graphs_created: u64,
    executes: u64,
    execute_errors: u64,
    execute_ns_total: u64,
    execute_ns_last: u64,
    release_errors: u64,
    runtime_jobs_pending: u64,
    log_lines: u64,
    log_dropped: u64,
}

/// Reads a few atomics: cheap enough for a normal scheduler.
#[rustler::nif]
fn counters() -> CountersTerm {
    let c = qnn::counters();
    CountersTerm {
        runtimes_alive: c.runtimes_alive,
        contexts_alive: c.contexts_alive,
        graphs_alive: c.graphs_alive,
        runtimes_created: c.runtimes_created,
        contexts_created: c.contexts_created,
        graphs_created: c.graphs_created,
        executes: c.executes,
        execute_errors: c.execute_errors,
        execute_ns_total: c.execute_ns_total,
        execute_ns_last: c.execute_ns_last,
        release_errors: c.release_errors,
        runtime_jobs_pending: c.runtime_jobs_pending,
        log_lines: c.log_lines,
        log_dropped: c.log_dropped,
    }
}

/// One entry of the ledger of live objects.
#[derive(NifMap)]
#[rustler(encode)]
struct LiveEntryTerm {
    id: u64,
    kind: Atom,
    site: String,
    age_ms: u64,
    detail: String,
}

/// Every live runtime, context and graph, oldest first: `[%{id, kind, site, age_ms, detail}]`.
/// Copies the ledger under its lock (taken only at object creation and release, never by
/// executes): cheap enough for a normal scheduler at the ledger sizes a leak hunt sees.
#[rustler::nif]
fn ledger_live() -> Vec<LiveEntryTerm> {
    qnn::ledger::live()
        .into_iter()
        .map(|e| LiveEntryTerm {
            id: e.id,
            kind: match e.kind {
                qnn::ledger::Kind::Runtime => atoms::runtime(),
                qnn::ledger::Kind::Context => atoms::context(),
                qnn::ledger::Kind::Graph => atoms::graph(),
            },
            age_ms: u64::try_from(e.age().as_millis()).unwrap_or(u64::MAX),
            site: e.site,
            detail: e.detail,
        })
        .collect()
}

/// The host backend's counters.
#[derive(NifMap)]
#[rustler(encode)]
struct HostBackendCountersTerm {
    live_handles: u64,
    execute_overlaps: u64,
    peak_concurrent_executes: u64,
    execute_count: u64,
}

/// Counters of the host backend at `path` (test support; the real QNN libraries have no such
/// exports): live QNN handles, overlapping executes on one graph, the peak number of executes
/// in flight, and executes entered. `{:ok, map} | {:error, %HexagonTpu.Error{}}`
#[rustler::nif(schedule = "DirtyIo")]
fn host_backend_counters<'a>(env: Env<'a>, path: String) -> Term<'a> {
    let result = qnn::host_backend::counters(Path::new(&path))
        .map(|c| HostBackendCountersTerm {
            live_handles: c.live_handles,
            execute_overlaps: c.execute_overlaps,
            peak_concurrent_executes: c.peak_concurrent_executes,
            execute_count: c.execute_count,
        })
        .map_err(Failure::from);
    ok_or_error(env, result)
}

/// Always `true` once the library is loaded; the Elixir stub answers `false`.
#[rustler::nif]
fn nif_loaded() -> bool {
    true
}
