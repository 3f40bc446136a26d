//! The trace of every phase (`qnn::trace`) for `HexagonTpu.Trace`: start, stop, its counts, and
//! the recording as Chrome / Perfetto trace-event JSON.

use rustler::{Atom, NifMap};

use crate::atoms;
use crate::error::Done;

/// Starts a recording into a fresh ring of `capacity` events: `:ok`, or `{:error, message}`.
#[rustler::nif]
fn trace_start(capacity: u64) -> Done<String> {
    let started = usize::try_from(capacity)
        .map_err(|_| format!("the trace capacity {capacity} is too large"))
        .and_then(qnn::trace::start);
    Done(started)
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
