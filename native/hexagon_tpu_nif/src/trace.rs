//! The trace of every phase (`qnn::trace`) for `HexagonTpu.Trace`: start, stop, its counts, and
//! the recording as Chrome / Perfetto trace-event JSON.

use rustler::{Atom, Encoder, Env, NifMap, Term};

use crate::atoms;

/// Starts a recording into a fresh ring of `capacity` events: `:ok`, or `{:error, message}`.
#[rustler::nif]
fn trace_start(env: Env<'_>, capacity: u64) -> Term<'_> {
    let started = usize::try_from(capacity)
        .map_err(|_| format!("the trace capacity {capacity} is too large"))
        .and_then(qnn::trace::start);
    match started {
        Ok(()) => atoms::ok().encode(env),
        Err(message) => (atoms::error(), message).encode(env),
    }
}

/// Stops the recording (kept for export until the next start).
#[rustler::nif]
fn trace_stop() -> Atom {
    qnn::trace::stop();
    atoms::ok()
}

#[derive(NifMap)]
#[rustler(encode)]
struct TraceInfo {
    recording: bool,
    capacity: u64,
    emitted: u64,
    dropped: u64,
    held: u64,
}

/// The recording's counts: `%{recording, capacity, emitted, dropped, held}`.
#[rustler::nif]
fn trace_info() -> TraceInfo {
    let s = qnn::trace::stats();
    TraceInfo {
        recording: s.recording,
        capacity: s.capacity as u64,
        emitted: s.emitted,
        dropped: s.dropped,
        held: s.held as u64,
    }
}

/// The recording as trace-event JSON (a binary). Dirty: a full ring is megabytes of text.
#[rustler::nif(schedule = "DirtyCpu")]
fn trace_export() -> String {
    qnn::trace::to_json(&qnn::trace::recording())
}
