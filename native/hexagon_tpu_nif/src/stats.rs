//! Native counters and the host backend's counters (test support).

use std::path::Path;

use rustler::{Atom, Encoder, Env, NifMap, Term};

use crate::atoms;
use crate::error::{Failure, ok_or_error};

/// Every counter `qnn::counters()` keeps, as a map with the names `HexagonTpu.Stats` documents
/// (the field names of `qnn::Counters`).
struct CountersTerm(qnn::Counters);

impl Encoder for CountersTerm {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        let pairs: Vec<(Term<'a>, u64)> = self
            .0
            .fields()
            .into_iter()
            // The names are a fixed set of identifiers; this cannot fail in practice.
            .filter_map(|(name, value)| Some((Atom::from_str(env, name).ok()?.encode(env), value)))
            .collect();
        Term::map_from_pairs(env, &pairs).unwrap_or_else(|_| rustler::types::map::map_new(env))
    }
}

/// Reads a few atomics: cheap enough for a normal scheduler.
#[rustler::nif]
fn counters() -> CountersTerm {
    CountersTerm(qnn::counters())
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
