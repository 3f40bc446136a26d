//! Native counters and the ledger of live objects.

use rustler::{Atom, Encoder, Env, NifMap, Term};

use crate::atoms;

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
    bytes: u64,
    held: Vec<(Atom, u64)>,
}

/// Every live runtime, context and graph, oldest first:
/// `[%{id, kind, site, age_ms, detail, bytes, held}]` (`held`: `[binary: n, spill_fill: n, source: n]`,
/// the parts of `bytes`).
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
            bytes: e.held.total(),
            held: e
                .held
                .0
                .iter()
                .map(|&(part, n)| {
                    let part = match part {
                        qnn::Part::Binary => atoms::binary(),
                        qnn::Part::SpillFill => atoms::spill_fill(),
                        qnn::Part::Source => atoms::source(),
                    };
                    (part, n)
                })
                .collect(),
            site: e.site,
            detail: e.detail,
        })
        .collect()
}

/// Always `true` once the library is loaded; the Elixir stub answers `false`.
#[rustler::nif]
fn nif_loaded() -> bool {
    true
}
