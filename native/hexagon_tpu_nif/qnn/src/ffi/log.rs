//! QNN's log, caught by a callback instead of going to stdout.
//!
//! QNN calls the callback on its own threads (and on whichever thread is inside a QNN call), with
//! a printf format and a `va_list`. The callback first asks the rate limiter (atomics, and the
//! queue's lock once per run of drops, to wake the drain that reports them) and drops the line
//! there, before formatting or allocating anything, when the rate is exceeded, the queue is full
//! or the process is exiting. A kept line is formatted on the stack
//! (`vsnprintf`), copied once into a `String` and pushed onto a bounded queue under a lock held
//! only for the push. One thread, started with the first log handle (never from the callback),
//! drains the queue into the sink the embedder installs ([`set_sink`]; the NIF forwards to
//! Logger). Without a sink, lines are counted and dropped.
//!
//! Qualcomm's HTP libraries log a few WARN lines every time a backend starts or a context loads
//! when nothing is wrong ([`STARTUP_CHATTER`]); those exact lines are demoted to
//! [`LogLevel::Debug`] ([`level_of`]), so that at the default level a warning means something.
//!
//! `QnnLog_Callback_t` carries no user data, so each backend library gets its own callback (a
//! small fixed table of them), which is how a line knows which library wrote it.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::base::sync::{lock, wait, wait_timeout};
use crate::ffi::loader::BackendLibrary;
use crate::observe::counters;
use crate::sys;

/// QNN's log levels, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Verbose,
    Debug,
}

impl LogLevel {
    pub(crate) fn raw(self) -> u32 {
        match self {
            LogLevel::Error => sys::QNN_LOG_LEVEL_ERROR,
            LogLevel::Warn => sys::QNN_LOG_LEVEL_WARN,
            LogLevel::Info => sys::QNN_LOG_LEVEL_INFO,
            LogLevel::Verbose => sys::QNN_LOG_LEVEL_VERBOSE,
            LogLevel::Debug => sys::QNN_LOG_LEVEL_DEBUG,
        }
    }

    fn from_raw(raw: u32) -> LogLevel {
        match raw {
            sys::QNN_LOG_LEVEL_ERROR => LogLevel::Error,
            sys::QNN_LOG_LEVEL_WARN => LogLevel::Warn,
            sys::QNN_LOG_LEVEL_INFO => LogLevel::Info,
            sys::QNN_LOG_LEVEL_VERBOSE => LogLevel::Verbose,
            _ => LogLevel::Debug,
        }
    }
}

/// The lines Qualcomm's HTP libraries (the device's and the x86 emulator's, QAIRT 2.4x) log at
/// WARN on every backend start and context load when nothing is wrong. Each is matched whole,
/// after `tidy`; `#` stands for one or more ASCII digits. Measured on the emulator of
/// onnxruntime-qnn 2.7.0 (QAIRT 2.43): creating a runtime logs the first, loading a context the
/// other three.
pub const STARTUP_CHATTER: [&str; 4] = [
    "Initializing HtpProvider",
    "No op packages found for architecture #; falling back to no-arch bucket",
    "m_CFBCallbackInfoObj is not initialized, return emptyList",
    "Sanitizing the value for hvx_threads and setting to default",
];

/// The level a line is logged at: QNN's own, except that a WARN line which is exactly one of
/// [`STARTUP_CHATTER`] becomes [`LogLevel::Debug`]. Errors are never demoted.
pub fn level_of(level: LogLevel, message: &str) -> LogLevel {
    if level == LogLevel::Warn && STARTUP_CHATTER.iter().any(|p| matches_whole(p, message)) {
        LogLevel::Debug
    } else {
        level
    }
}

/// Whether `message` is `pattern` exactly, `#` in the pattern standing for one or more ASCII
/// digits.
fn matches_whole(pattern: &str, message: &str) -> bool {
    let mut rest = message;
    for (i, literal) in pattern.split('#').enumerate() {
        if i > 0 {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return false;
            }
            rest = &rest[digits..];
        }
        match rest.strip_prefix(literal) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    rest.is_empty()
}

/// One line of QNN's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub level: LogLevel,
    /// The backend library that wrote it.
    pub backend: PathBuf,
    pub message: String,
}

/// Lines accepted per second on average, and the burst allowed above that. A chatty backend
/// (ONNX Runtime measured a 7x slowdown on a device at WARN) cannot flood the sink.
pub const RATE_PER_SECOND: u32 = 50;
pub const BURST: u32 = 200;
/// Lines waiting for the drain thread; beyond this they are dropped (and counted).
const QUEUE_CAPACITY: usize = 1024;
/// Longest line kept, in bytes; longer ones are cut at a character boundary.
const MAX_LINE: usize = 2048;

type Sink = Box<dyn Fn(LogRecord) + Send + Sync>;
static SINK: OnceLock<Mutex<Option<Sink>>> = OnceLock::new();

/// Sends every later line to `sink`, on the drain thread (never on QNN's). Replaces any sink set
/// before.
pub fn set_sink(sink: impl Fn(LogRecord) + Send + Sync + 'static) {
    *lock(SINK.get_or_init(Default::default)) = Some(Box::new(sink));
}

/// A line as the callback queues it: the library is resolved on the drain thread.
struct Line {
    level: LogLevel,
    slot: usize,
    message: String,
}

struct Queue {
    lines: VecDeque<Line>,
    /// Lines ever pushed, and lines the drain has finished with (handed to the sink, or dropped
    /// for want of one): [`flush`] waits for the second to reach what the first was.
    pushed: u64,
    finished: u64,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a line is pushed or a drop is to be reported (the drain waits on it).
    ready: Condvar,
    /// Signalled when the drain has finished with a line ([`flush`] waits on it).
    finished: Condvar,
}

/// Lines waiting in the queue (read by the callback without the lock).
static QUEUED: AtomicUsize = AtomicUsize::new(0);
/// Lines dropped since the drain last reported it.
static UNREPORTED_DROPS: AtomicU64 = AtomicU64::new(0);

/// Whether [`SHARED`] was made ([`flush`] does not make it).
static STARTED: AtomicBool = AtomicBool::new(false);

/// Made, with the drain thread, when the first log callback is handed to QNN.
static SHARED: LazyLock<Arc<Shared>> = LazyLock::new(|| {
    STARTED.store(true, Relaxed);
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue {
            lines: VecDeque::new(),
            pushed: 0,
            finished: 0,
        }),
        ready: Condvar::new(),
        finished: Condvar::new(),
    });
    let drain = Arc::clone(&shared);
    // If the thread cannot start, lines pile up to the queue's capacity and are then dropped.
    let _ = std::thread::Builder::new()
        .name("qnn-log".into())
        .spawn(move || {
            // A panic in a sink must not end the drain (lines would pile up and be dropped).
            while std::panic::catch_unwind(|| drain_forever(&drain)).is_err() {}
        });
    shared
});

fn drain_forever(shared: &Shared) {
    let mut last_report: Option<Instant> = None;
    loop {
        let mut queue = lock(&shared.queue);
        let (line, queued) = loop {
            if let Some(line) = queue.lines.pop_front() {
                QUEUED.fetch_sub(1, Relaxed);
                let record = LogRecord {
                    level: line.level,
                    backend: backend_of(line.slot),
                    message: line.message,
                };
                break (record, true);
            }
            if UNREPORTED_DROPS.load(Relaxed) > 0 {
                // Drops are reported at most once a second, not once per dropped line.
                let wait = last_report.map_or(Duration::ZERO, |at| {
                    Duration::from_secs(1).saturating_sub(at.elapsed())
                });
                if wait.is_zero() {
                    let drops = UNREPORTED_DROPS.swap(0, Relaxed);
                    last_report = Some(Instant::now());
                    let report = LogRecord {
                        level: LogLevel::Warn,
                        backend: PathBuf::new(),
                        message: format!(
                            "{drops} QNN log line(s) dropped (more than {RATE_PER_SECOND}/s, bursts of {BURST})"
                        ),
                    };
                    break (report, false);
                }
                queue = wait_timeout(&shared.ready, queue, wait);
                continue;
            }
            queue = wait(&shared.ready, queue);
        };
        drop(queue);
        deliver(line);
        if queued {
            lock(&shared.queue).finished += 1;
            shared.finished.notify_all();
        }
    }
}

/// Waits until every line queued before the call has been handed to the sink (or dropped for
/// want of one), for at most `timeout`; whether it got there. A caller about to stop, or to read
/// what a failed QNN call explained, lets the lines through first: QNN logs a call's lines on
/// the caller's thread before the call returns, and the drain hands them on in order. Never call
/// it from the sink (the drain would wait for itself).
pub fn flush(timeout: Duration) -> bool {
    if !STARTED.load(Relaxed) {
        return true; // no log handle ever made: nothing was ever queued
    }
    let shared = &*SHARED;
    // Beyond the clock's range: no deadline.
    let deadline = Instant::now().checked_add(timeout);
    let mut queue = lock(&shared.queue);
    let target = queue.pushed;
    while queue.finished < target {
        queue = match deadline {
            None => wait(&shared.finished, queue),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                wait_timeout(&shared.finished, queue, left)
            }
        };
    }
    true
}

fn deliver(line: LogRecord) {
    let sinks = SINK.get().map(|s| lock(s));
    match sinks.as_deref() {
        Some(Some(sink)) => {
            sink(line);
            // Counted once handed on, so a reader that sees the count can expect the line.
            counters::record_log_line();
        }
        _ => {
            counters::record_log_dropped();
        }
    }
}

/// The rate limit, as a generic cell rate algorithm on one atomic: the "theoretical arrival time"
/// of the next line, in nanoseconds since [`EPOCH`]. A line is let through when that time is
/// less than a burst's worth ahead of now.
static NEXT_LINE_AT: AtomicU64 = AtomicU64::new(0);
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
const LINE_INTERVAL_NS: u64 = 1_000_000_000 / RATE_PER_SECOND as u64;
const BURST_NS: u64 = (BURST as u64 - 1) * LINE_INTERVAL_NS;

/// Whether a line may be kept: within the rate and the queue's room, and not exiting. Touches
/// only atomics and allocates nothing, except that the first line refused after the drain's last
/// report takes the queue's lock for a moment to wake it; a refused line is counted as dropped.
fn admit() -> bool {
    if crate::base::exit::exiting() {
        return false;
    }
    let now = u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut next = NEXT_LINE_AT.load(Relaxed);
    let admitted = loop {
        let start = next.max(now);
        if start - now > BURST_NS || QUEUED.load(Relaxed) >= QUEUE_CAPACITY {
            break false;
        }
        match NEXT_LINE_AT.compare_exchange_weak(next, start + LINE_INTERVAL_NS, Relaxed, Relaxed) {
            Ok(_) => break true,
            Err(actual) => next = actual,
        }
    };
    if !admitted {
        counters::record_log_dropped();
        if UNREPORTED_DROPS.fetch_add(1, Relaxed) == 0 {
            // Wake the drain to report it (under the lock, so the wake-up cannot be missed).
            let shared = &*SHARED;
            let _queue = lock(&shared.queue);
            shared.ready.notify_one();
        }
    }
    admitted
}

/// Queues one admitted line (the lock is held only to push).
fn accept(level: LogLevel, slot: usize, message: String) {
    let shared = &*SHARED;
    let mut queue = lock(&shared.queue);
    QUEUED.fetch_add(1, Relaxed);
    queue.pushed += 1;
    queue.lines.push_back(Line {
        level,
        slot,
        message,
    });
    drop(queue);
    shared.ready.notify_one();
}

/// Queues a line of this crate's own about `lib` (a refused performance vote, say), through the
/// same rate limit, queue and sink as QNN's lines. Any thread; never waits for the VM.
/// Whether the rate limit let it through.
pub(crate) fn notice(level: LogLevel, lib: &BackendLibrary, message: String) -> bool {
    LazyLock::force(&EPOCH);
    let admitted = admit();
    if admitted {
        accept(level, slot_of(lib), message);
    }
    admitted
}

/// The libraries the callbacks belong to, by slot.
static SLOTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The log callback for `lib` (as `QnnLog_create` takes it). The first [`CALLBACKS`] libraries
/// get one each; later ones share the last.
pub(crate) fn callback_for(lib: &BackendLibrary) -> *const c_void {
    // The queue, its drain thread and the clock start here, not in QNN's callback.
    LazyLock::force(&SHARED);
    LazyLock::force(&EPOCH);
    CALLBACKS[slot_of(lib)] as *const c_void
}

/// `lib`'s slot: the first [`CALLBACKS`] libraries get one each; later ones share the last.
fn slot_of(lib: &BackendLibrary) -> usize {
    let mut slots = lock(&SLOTS);
    match slots.iter().position(|p| *p == lib.path) {
        Some(slot) => slot,
        None if slots.len() < CALLBACKS.len() => {
            slots.push(lib.path.clone());
            slots.len() - 1
        }
        None => CALLBACKS.len() - 1,
    }
}

fn backend_of(slot: usize) -> PathBuf {
    lock(&SLOTS).get(slot).cloned().unwrap_or_default()
}

// A C `va_list` parameter arrives as a pointer on both supported ABIs: x86-64 SysV's va_list is
// an array type (it decays to a pointer), and AAPCS64 passes its 32-byte va_list struct by
// reference to a caller-made copy. `vsnprintf` takes it the same way, so the pointer is handed on
// untouched.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the QNN log callback's va_list handling is written for x86-64 and aarch64 only");

type VaList = *mut c_void;

unsafe extern "C" {
    fn vsnprintf(buf: *mut c_char, size: usize, fmt: *const c_char, args: VaList) -> c_int;
}

type Callback = unsafe extern "C" fn(*const c_char, u32, u64, VaList);

macro_rules! callbacks {
    ($($slot:literal),*) => {
        [$({
            unsafe extern "C" fn callback(fmt: *const c_char, level: u32, _ts: u64, args: VaList) {
                // SAFETY: QNN passes a printf format and its matching va_list.
                unsafe { on_log($slot, fmt, level, args) }
            }
            callback as Callback
        }),*]
    };
}

static CALLBACKS: [Callback; 8] = callbacks!(0, 1, 2, 3, 4, 5, 6, 7);

/// Formats one line and hands it on. Must not unwind into QNN.
///
/// # Safety
/// `fmt` is NULL or a printf format string whose arguments `args` holds.
unsafe fn on_log(slot: usize, fmt: *const c_char, level: u32, args: VaList) {
    if fmt.is_null() || !admit() {
        return;
    }
    let mut buf = [0u8; MAX_LINE];
    // SAFETY: `buf` is writable for its length; `fmt`/`args` are QNN's format and arguments;
    // vsnprintf writes at most `buf.len()` bytes including the NUL.
    let written = unsafe { vsnprintf(buf.as_mut_ptr().cast(), buf.len(), fmt, args) };
    if written < 0 {
        return;
    }
    let len = (written as usize).min(buf.len() - 1);
    let _ = std::panic::catch_unwind(|| {
        let message = tidy(&String::from_utf8_lossy(&buf[..len]));
        if !message.is_empty() {
            accept(level_of(LogLevel::from_raw(level), &message), slot, message);
        }
    });
}

/// QNN's lines carry their own level tag (`" <E> Failed to ..."`); the level travels
/// separately, so the tag and the surrounding whitespace go.
fn tidy(line: &str) -> String {
    let line = line.trim();
    let untagged = ["<E>", "<W>", "<I>", "<V>", "<D>"]
        .iter()
        .find_map(|tag| line.strip_prefix(tag))
        .unwrap_or(line);
    untagged.trim_start().to_string()
}

#[cfg(test)]
mod tests {
    use super::{LogLevel, level_of, tidy};
    use crate::base::counting_alloc::{CountingAllocator, allocations};

    #[global_allocator]
    static COUNTING: CountingAllocator = CountingAllocator;

    #[test]
    fn a_line_over_the_rate_is_dropped_before_it_is_formatted_or_allocated() {
        std::sync::LazyLock::force(&super::SHARED);
        // With a sink the drain counts nothing as dropped: `log_dropped` then counts the rate
        // limit's refusals alone, even while the drain is still delivering the burst.
        super::set_sink(|_| {});
        // A format without conversions, so vsnprintf only copies the va_list (a zeroed one as
        // large as either ABI's) and reads no argument from it.
        let fmt = c" <W> a chatty backend\n".as_ptr();
        let mut no_arguments = [0u64; 4];
        let mut call = || {
            let args = no_arguments.as_mut_ptr().cast();
            // SAFETY: a printf format with no conversions reads no arguments.
            unsafe { super::on_log(0, fmt, crate::sys::QNN_LOG_LEVEL_WARN, args) }
        };
        // Spend the burst.
        for _ in 0..super::BURST + 10 {
            call();
        }
        let dropped = crate::observe::counters::counters().log_dropped;
        let before = allocations();
        for _ in 0..100 {
            call();
        }
        let dropped = crate::observe::counters::counters().log_dropped - dropped;
        let allocations = allocations() - before;
        // At 50 lines a second, at most a line or two is admitted meanwhile; each admitted line
        // allocates its text once (and may grow the queue).
        let admitted = 100u64.saturating_sub(dropped);
        assert!(
            dropped >= 90,
            "only {dropped} of 100 lines over the rate were dropped"
        );
        assert!(
            allocations <= 2 * admitted,
            "{allocations} allocations for {dropped} dropped and {admitted} admitted lines"
        );
    }

    #[test]
    fn known_startup_chatter_is_demoted_to_debug_and_nothing_else() {
        use LogLevel::{Debug, Error, Info, Warn};
        for line in [
            "Initializing HtpProvider",
            "No op packages found for architecture 68; falling back to no-arch bucket",
            "No op packages found for architecture 73; falling back to no-arch bucket",
            "m_CFBCallbackInfoObj is not initialized, return emptyList",
            "Sanitizing the value for hvx_threads and setting to default",
        ] {
            assert_eq!(level_of(Warn, line), Debug, "{line}");
            assert_eq!(
                level_of(Warn, &tidy(&format!(" <W> {line}\n"))),
                Debug,
                "{line}"
            );
            // Only WARN is demoted: the same text as an error or at info stays as it is.
            assert_eq!(level_of(Error, line), Error, "{line}");
            assert_eq!(level_of(Info, line), Info, "{line}");
        }
        // Matched whole: anything more, less or different is a warning.
        for line in [
            "Initializing HtpProvider again",
            "Initializing HtpProvider failed",
            "No op packages found for architecture ; falling back to no-arch bucket",
            "No op packages found for architecture v68; falling back to no-arch bucket",
            "No op packages found for architecture 68; falling back to no-arch bucket!",
            "m_CFBCallbackInfoObj is not initialized",
            "Sanitizing the value for hmx_threads and setting to default",
            "",
        ] {
            assert_eq!(level_of(Warn, line), Warn, "{line}");
        }
    }

    #[test]
    fn level_tags_and_whitespace_are_trimmed() {
        assert_eq!(
            tidy(" <E> Failed to create context\n"),
            "Failed to create context"
        );
        assert_eq!(
            tidy("<W>  Sanitizing hvx_threads"),
            "Sanitizing hvx_threads"
        );
        assert_eq!(
            tidy("graph.cc:3842::ERROR:bad header"),
            "graph.cc:3842::ERROR:bad header"
        );
        assert_eq!(tidy("  <X> kept "), "<X> kept");
    }
}
