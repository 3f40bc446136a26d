//! A trace of every phase: runtime creation, context loading, graph retrieval, executes (their
//! wait for the graph's turn, quantize, `graphExecute`, dequantize, and per-op spans from a
//! profile), closes and frees, recorded into a bounded ring and exported as Chrome / Perfetto
//! trace-event JSON.
//!
//! Off by default. Off, [`span`] costs one relaxed atomic load and returns an empty guard: no
//! clock read, no allocation, no lock. On ([`start`]), a span reads the clock when it opens and
//! when its guard drops, and the finished event is pushed into a ring of fixed capacity (allocated
//! by [`start`]) under a lock held only for the push. When the ring is full the oldest event is
//! overwritten: [`stats`] counts every event `emitted` and those `dropped` that way, so a reader
//! knows whether the recording is whole.
//!
//! A phase is a guard held for its length, opened where the phase runs: `Execute` where an
//! execute runs ([`crate::io::execute`], and in the NIF the caller's thread, the graph's worker,
//! or the worker's hand-over to the backend's queue), the others at their one QNN call or pass:
//!
//! ```ignore
//! let _span = trace::span(Phase::Quantize, graph_name);
//! ```
//!
//! Spans nest by thread: an event covers the time its guard lived, on the thread that opened it,
//! so the events of one thread nest properly (a child starts no earlier and ends no later than
//! its parent). The one exception is [`Phase::Wait`], which opens on the caller's thread when an
//! execute is queued and ends on the graph's worker when it starts: it is exported as an async
//! pair (`ph` `b`/`e`) with its own id.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Instant;

/// The phases a trace records. [`Phase::label`] is the event's name in the export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// `runtime.create`: a runtime's creation on the caller's thread (opening the libraries and
    /// handing the handles' creation to the runtime's thread).
    RuntimeCreate,
    /// `runtime.handles`: the log, backend and device handles made on the runtime's thread.
    RuntimeHandles,
    /// `QnnLog_create`.
    LogCreate,
    /// `QnnBackend_create`.
    BackendCreate,
    /// `QnnDevice_create` (with `deviceGetPlatformInfo`).
    DeviceCreate,
    /// `context.read`: a context binary read from its file.
    ContextRead,
    /// `context.load`: a load on the caller's thread: the metadata, the pre-flight verdict,
    /// and handing the creation to the runtime's thread.
    ContextLoad,
    /// `QnnSystemContext_getMetadata`: the binary's metadata read with QnnSystem.
    Metadata,
    /// `QnnContext_createFromBinary`, on the runtime's thread.
    CreateFromBinary,
    /// `QnnGraph_retrieve`.
    GraphRetrieve,
    /// `execute.wait`: a queued execute waiting for its graph's turn (an async event).
    Wait,
    /// `execute`: one execute, from its checks to its last output conversion.
    Execute,
    /// `execute.quantize`: the inputs converted to the model's types.
    Quantize,
    /// `QnnGraph_execute`.
    GraphExecute,
    /// `execute.dequantize`: the outputs converted to f32.
    Dequantize,
    /// `op`: one op of a profiled execute, laid inside its `QnnGraph_execute` ([`record`]).
    Op,
    /// `QnnContext_free`, on the runtime's thread.
    ContextFree,
    /// `context.recover`: a context created again from its source after a device reset (its
    /// dead handle freed, `QnnContext_createFromBinary` inside), on the runtime's thread.
    ContextRecover,
    /// `runtime.free`: the device, backend and log handles freed on the runtime's thread.
    RuntimeFree,
}

impl Phase {
    /// The event's name in the export.
    pub fn label(self) -> &'static str {
        match self {
            Phase::RuntimeCreate => "runtime.create",
            Phase::RuntimeHandles => "runtime.handles",
            Phase::LogCreate => "QnnLog_create",
            Phase::BackendCreate => "QnnBackend_create",
            Phase::DeviceCreate => "QnnDevice_create",
            Phase::ContextRead => "context.read",
            Phase::ContextLoad => "context.load",
            Phase::Metadata => "QnnSystemContext_getMetadata",
            Phase::CreateFromBinary => "QnnContext_createFromBinary",
            Phase::GraphRetrieve => "QnnGraph_retrieve",
            Phase::Wait => "execute.wait",
            Phase::Execute => "execute",
            Phase::Quantize => "execute.quantize",
            Phase::GraphExecute => "QnnGraph_execute",
            Phase::Dequantize => "execute.dequantize",
            Phase::Op => "op",
            Phase::ContextFree => "QnnContext_free",
            Phase::ContextRecover => "context.recover",
            Phase::RuntimeFree => "runtime.free",
        }
    }

    /// What the event's `object` argument names.
    fn object(self) -> &'static str {
        match self {
            Phase::RuntimeCreate
            | Phase::RuntimeHandles
            | Phase::LogCreate
            | Phase::BackendCreate
            | Phase::DeviceCreate
            | Phase::RuntimeFree => "backend",
            Phase::ContextRead
            | Phase::ContextLoad
            | Phase::Metadata
            | Phase::CreateFromBinary
            | Phase::ContextFree
            | Phase::ContextRecover => "context",
            Phase::GraphRetrieve
            | Phase::Wait
            | Phase::Execute
            | Phase::Quantize
            | Phase::GraphExecute
            | Phase::Dequantize => "graph",
            Phase::Op => "op",
        }
    }
}

/// Events the ring holds when [`start`] is not given a capacity.
pub const DEFAULT_CAPACITY: usize = 65_536;
/// The largest capacity [`start`] accepts (an event is about 64 bytes plus its name).
pub const MAX_CAPACITY: usize = 16 * 1024 * 1024;

static ON: AtomicBool = AtomicBool::new(false);
static EMITTED: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static NEXT_ASYNC_ID: AtomicU64 = AtomicU64::new(1);
static NEXT_TID: AtomicU64 = AtomicU64::new(1);
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// One finished event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub phase: Phase,
    /// The object it concerns: a backend library, a context's source, a graph or an op name.
    pub name: Box<str>,
    /// The thread it was recorded on (this trace's own numbering, from 1; see
    /// [`Recording::threads`]).
    pub tid: u64,
    /// Nanoseconds since the trace clock's epoch.
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Non-zero for an async event ([`Phase::Wait`]).
    pub async_id: u64,
}

struct Ring {
    events: Vec<Event>,
    capacity: usize,
    /// Where the next event goes once the ring is full (the oldest event).
    next: usize,
    /// Threads seen while recording: (tid, name).
    threads: Vec<(u64, Box<str>)>,
}

static RING: Mutex<Ring> = Mutex::new(Ring {
    events: Vec::new(),
    capacity: 0,
    next: 0,
    threads: Vec::new(),
});

fn ring() -> MutexGuard<'static, Ring> {
    // Each critical section is one push or one copy: a panic cannot leave it half done.
    crate::base::sync::lock(&RING)
}

thread_local! {
    /// This thread's trace id (0 until it first records).
    static TID: Cell<u64> = const { Cell::new(0) };
}

fn tid() -> u64 {
    TID.with(|t| {
        if t.get() == 0 {
            let id = NEXT_TID.fetch_add(1, Relaxed);
            t.set(id);
            let name = std::thread::current()
                .name()
                .map(str::to_string)
                .or_else(os_thread_name)
                .unwrap_or_else(|| "thread".to_string());
            ring().threads.push((id, format!("{name} #{id}").into()));
        }
        t.get()
    })
}

/// The OS's name of this thread (the VM names its schedulers: `1_dirty_cpu_s`), for threads
/// Rust did not start.
fn os_thread_name() -> Option<String> {
    let mut buf = [0 as libc::c_char; 64];
    // SAFETY: `buf` is writable for its length, which is passed; pthread_self() is this thread.
    let rc = unsafe { libc::pthread_getname_np(libc::pthread_self(), buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: on success the buffer holds a NUL-terminated name within its length.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    let name = name.to_string_lossy();
    (!name.is_empty()).then(|| name.into_owned())
}

fn now_ns() -> u64 {
    u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Starts recording into a fresh ring of `capacity` events (the previous recording and the
/// counts are discarded). Errors on a capacity of 0 or above [`MAX_CAPACITY`].
pub fn start(capacity: usize) -> Result<(), String> {
    if capacity == 0 || capacity > MAX_CAPACITY {
        return Err(format!(
            "the trace capacity must be 1..={MAX_CAPACITY} events, got {capacity}"
        ));
    }
    LazyLock::force(&EPOCH);
    let mut ring = ring();
    ON.store(false, Relaxed);
    ring.events = Vec::with_capacity(capacity);
    ring.capacity = capacity;
    ring.next = 0;
    // Threads keep their ids across recordings; the names of those seen before stay known.
    EMITTED.store(0, Relaxed);
    DROPPED.store(0, Relaxed);
    ON.store(true, Relaxed);
    Ok(())
}

/// Stops recording; the recording stays for [`recording`] until the next [`start`]. Spans open
/// now are not recorded when they close.
pub fn stop() {
    ON.store(false, Relaxed);
}

/// Whether a recording is running.
pub fn is_on() -> bool {
    ON.load(Relaxed)
}

/// The counts of the current (or last) recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    pub recording: bool,
    pub capacity: usize,
    /// Events recorded since [`start`], whether the ring still holds them or not.
    pub emitted: u64,
    /// Events overwritten because the ring was full.
    pub dropped: u64,
    /// Events the ring holds now (`emitted - dropped`).
    pub held: usize,
}

pub fn stats() -> Stats {
    let ring = ring();
    Stats {
        recording: is_on(),
        capacity: ring.capacity,
        emitted: EMITTED.load(Relaxed),
        dropped: DROPPED.load(Relaxed),
        held: ring.events.len(),
    }
}

/// A copy of the recording: its events oldest first, and the threads they name.
#[derive(Clone, Debug)]
pub struct Recording {
    pub events: Vec<Event>,
    pub threads: Vec<(u64, Box<str>)>,
    pub stats: Stats,
}

/// Copies the recording (under the ring's lock; recording goes on meanwhile if it is on).
pub fn recording() -> Recording {
    let stats = stats();
    let ring = ring();
    let mut events = Vec::with_capacity(ring.events.len());
    events.extend_from_slice(&ring.events[ring.next..]);
    events.extend_from_slice(&ring.events[..ring.next]);
    Recording {
        events,
        threads: ring.threads.clone(),
        stats,
    }
}

fn push(event: Event) {
    let mut ring = ring();
    // Checked again under the lock: a `start` in between has reset the ring.
    if !is_on() || ring.capacity == 0 {
        return;
    }
    EMITTED.fetch_add(1, Relaxed);
    if ring.events.len() < ring.capacity {
        ring.events.push(event);
    } else {
        let at = ring.next;
        ring.events[at] = event;
        ring.next = (at + 1) % ring.capacity;
        DROPPED.fetch_add(1, Relaxed);
    }
}

/// A phase in progress: recorded when dropped, if a recording was on when it opened and still
/// is. Empty (and free) when tracing is off.
#[must_use = "a span records the time until it is dropped"]
pub struct Span(Option<Open>);

struct Open {
    phase: Phase,
    name: Box<str>,
    tid: u64,
    start_ns: u64,
}

/// Opens a span of `phase` about `name` on this thread. Off, this is one relaxed load.
#[inline]
pub fn span(phase: Phase, name: &str) -> Span {
    if !ON.load(Relaxed) {
        return Span(None);
    }
    Span(Some(Open {
        phase,
        name: name.into(),
        tid: tid(),
        start_ns: now_ns(),
    }))
}

/// [`span`] with a name made only when tracing is on.
#[inline]
pub fn span_lazy(phase: Phase, name: impl FnOnce() -> String) -> Span {
    if !ON.load(Relaxed) {
        return Span(None);
    }
    span(phase, &name())
}

impl Span {
    /// Ends the span now (as dropping it does).
    pub fn end(self) {}

    /// Drops the span unrecorded: what it was opened for happens elsewhere (a queued execute
    /// runs on its graph's thread, which records it there).
    pub fn discard(mut self) {
        self.0 = None;
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(open) = self.0.take() {
            let end = now_ns();
            let async_id = if open.phase == Phase::Wait {
                NEXT_ASYNC_ID.fetch_add(1, Relaxed)
            } else {
                0
            };
            push(Event {
                phase: open.phase,
                name: open.name,
                tid: open.tid,
                start_ns: open.start_ns,
                duration_ns: end.saturating_sub(open.start_ns),
                async_id,
            });
        }
    }
}

/// The hook for events measured elsewhere (the ops of a profiled execute): records `phase`
/// about `name` on this thread, `offset_ns` after `span_start` (an [`Instant`] taken when the
/// enclosing phase began) and lasting `duration_ns`. Nothing happens when tracing is off.
pub fn record(phase: Phase, name: &str, span_start: Instant, offset_ns: u64, duration_ns: u64) {
    if !ON.load(Relaxed) {
        return;
    }
    let base =
        u64::try_from(span_start.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX);
    push(Event {
        phase,
        name: name.into(),
        tid: tid(),
        start_ns: base.saturating_add(offset_ns),
        duration_ns,
        async_id: 0,
    });
}

/// The recording as Chrome / Perfetto trace-event JSON (the JSON object format): thread-name
/// metadata events, then one complete event (`ph` `X`) per span, or an async `b`/`e` pair for a
/// wait, sorted by start time (a parent before the children that start with it); `ts` and `dur`
/// in µs with ns precision, `pid` the OS process id, `tid` the trace's thread number, `cat`
/// `hexagon_tpu`, `args` the object the event concerns. `otherData` holds the recording's
/// counts (`emitted`, `dropped`, `capacity`).
pub fn to_json(recording: &Recording) -> String {
    let pid = std::process::id();
    let mut events: Vec<&Event> = recording.events.iter().collect();
    events.sort_by_key(|e| (e.start_ns, std::cmp::Reverse(e.duration_ns)));
    let mut out = String::with_capacity(64 + 160 * events.len());
    out.push_str("{\"traceEvents\":[");
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push('\n');
    };
    for (tid, name) in &recording.threads {
        sep(&mut out);
        let _ = write!(
            out,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        );
        json_string(&mut out, name);
        out.push_str("}}");
    }
    for e in events {
        let args = |out: &mut String| {
            let _ = write!(out, ",\"args\":{{\"{}\":", e.phase.object());
            json_string(out, &e.name);
            out.push('}');
        };
        let head = |out: &mut String, ph: &str, ts: u64| {
            out.push_str("{\"name\":\"");
            out.push_str(e.phase.label());
            let _ = write!(
                out,
                "\",\"cat\":\"hexagon_tpu\",\"ph\":\"{ph}\",\"pid\":{pid},\"tid\":{},\"ts\":{}",
                e.tid,
                micros(ts)
            );
        };
        sep(&mut out);
        if e.async_id == 0 {
            head(&mut out, "X", e.start_ns);
            let _ = write!(out, ",\"dur\":{}", micros(e.duration_ns));
            args(&mut out);
            out.push('}');
        } else {
            head(&mut out, "b", e.start_ns);
            let _ = write!(out, ",\"id\":{}", e.async_id);
            args(&mut out);
            out.push('}');
            sep(&mut out);
            head(&mut out, "e", e.start_ns.saturating_add(e.duration_ns));
            let _ = write!(out, ",\"id\":{}", e.async_id);
            out.push('}');
        }
    }
    let s = &recording.stats;
    let _ = write!(
        out,
        "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"emitted\":{},\"dropped\":{},\"capacity\":{}}}}}\n",
        s.emitted, s.dropped, s.capacity
    );
    out
}

/// Nanoseconds as microseconds with three decimals (`1234567` → `1234.567`).
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// `s` as a JSON string literal.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(phase: Phase, name: &str, start_ns: u64, duration_ns: u64, async_id: u64) -> Event {
        Event {
            phase,
            name: name.into(),
            tid: 1,
            start_ns,
            duration_ns,
            async_id,
        }
    }

    #[test]
    fn json_has_metadata_complete_and_async_events_in_start_order() {
        let recording = Recording {
            events: vec![
                event(Phase::Quantize, "g", 1_500, 250, 0),
                event(Phase::Execute, "g", 1_500, 9_000, 0),
                event(Phase::Wait, "g", 1_000, 500, 7),
            ],
            threads: vec![(1, "dirty \"cpu\"\n".into())],
            stats: Stats {
                recording: false,
                capacity: 8,
                emitted: 4,
                dropped: 1,
                held: 3,
            },
        };
        let pid = std::process::id();
        let json = to_json(&recording);
        let expected = format!(
            "{{\"traceEvents\":[\n\
             {{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":1,\"args\":{{\"name\":\"dirty \\\"cpu\\\"\\n\"}}}},\n\
             {{\"name\":\"execute.wait\",\"cat\":\"hexagon_tpu\",\"ph\":\"b\",\"pid\":{pid},\"tid\":1,\"ts\":1.000,\"id\":7,\"args\":{{\"graph\":\"g\"}}}},\n\
             {{\"name\":\"execute.wait\",\"cat\":\"hexagon_tpu\",\"ph\":\"e\",\"pid\":{pid},\"tid\":1,\"ts\":1.500,\"id\":7}},\n\
             {{\"name\":\"execute\",\"cat\":\"hexagon_tpu\",\"ph\":\"X\",\"pid\":{pid},\"tid\":1,\"ts\":1.500,\"dur\":9.000,\"args\":{{\"graph\":\"g\"}}}},\n\
             {{\"name\":\"execute.quantize\",\"cat\":\"hexagon_tpu\",\"ph\":\"X\",\"pid\":{pid},\"tid\":1,\"ts\":1.500,\"dur\":0.250,\"args\":{{\"graph\":\"g\"}}}}\n\
             ],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"emitted\":4,\"dropped\":1,\"capacity\":8}}}}\n"
        );
        assert_eq!(json, expected);
    }

    #[test]
    fn micros_keep_nanoseconds() {
        assert_eq!(micros(0), "0.000");
        assert_eq!(micros(999), "0.999");
        assert_eq!(micros(1_234_567), "1234.567");
    }
}
