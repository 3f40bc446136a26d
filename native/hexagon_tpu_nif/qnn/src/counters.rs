//! Process-wide counters: live QNN objects (the leak guard; [`crate::ledger`] says where each
//! live one came from) and execute statistics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::ledger::Kind;

static RUNTIMES_ALIVE: AtomicU64 = AtomicU64::new(0);
static CONTEXTS_ALIVE: AtomicU64 = AtomicU64::new(0);
static GRAPHS_ALIVE: AtomicU64 = AtomicU64::new(0);
static RUNTIMES_CREATED: AtomicU64 = AtomicU64::new(0);
static CONTEXTS_CREATED: AtomicU64 = AtomicU64::new(0);
static GRAPHS_CREATED: AtomicU64 = AtomicU64::new(0);
static EXECUTES: AtomicU64 = AtomicU64::new(0);
static EXECUTE_ERRORS: AtomicU64 = AtomicU64::new(0);
static EXECUTE_NS_TOTAL: AtomicU64 = AtomicU64::new(0);
static EXECUTE_NS_LAST: AtomicU64 = AtomicU64::new(0);
static RELEASE_ERRORS: AtomicU64 = AtomicU64::new(0);

/// A snapshot of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Runtimes whose QNN handles are not yet freed.
    pub runtimes_alive: u64,
    /// Contexts whose QNN handle is not yet freed.
    pub contexts_alive: u64,
    /// Graph objects not yet dropped or closed.
    pub graphs_alive: u64,
    pub runtimes_created: u64,
    pub contexts_created: u64,
    pub graphs_created: u64,
    /// Calls that reached `graphExecute`, successful or not.
    pub executes: u64,
    /// Calls where `graphExecute` returned an error.
    pub execute_errors: u64,
    /// Sum of pure `graphExecute` time.
    pub execute_ns_total: u64,
    /// Pure `graphExecute` time of the latest call.
    pub execute_ns_last: u64,
    /// QNN free calls that failed (in `close` or in a destructor).
    pub release_errors: u64,
    /// Loads, frees and closes handed to runtimes' own threads and not yet done (a handle whose
    /// free is queued is still counted alive).
    pub runtime_jobs_pending: u64,
    /// Lines of QNN's log forwarded to the sink.
    pub log_lines: u64,
    /// Lines of QNN's log dropped (rate limit, full queue, or no sink).
    pub log_dropped: u64,
}

/// Reads all counters.
pub fn counters() -> Counters {
    Counters {
        runtimes_alive: RUNTIMES_ALIVE.load(Relaxed),
        contexts_alive: CONTEXTS_ALIVE.load(Relaxed),
        graphs_alive: GRAPHS_ALIVE.load(Relaxed),
        runtimes_created: RUNTIMES_CREATED.load(Relaxed),
        contexts_created: CONTEXTS_CREATED.load(Relaxed),
        graphs_created: GRAPHS_CREATED.load(Relaxed),
        executes: EXECUTES.load(Relaxed),
        execute_errors: EXECUTE_ERRORS.load(Relaxed),
        execute_ns_total: EXECUTE_NS_TOTAL.load(Relaxed),
        execute_ns_last: EXECUTE_NS_LAST.load(Relaxed),
        release_errors: RELEASE_ERRORS.load(Relaxed),
        runtime_jobs_pending: crate::owner::pending(),
        log_lines: crate::log::log_counts().0,
        log_dropped: crate::log::log_counts().1,
    }
}

/// The `*_alive` and `*_created` counters of one kind of object (moved only by
/// [`ledger::Alive`](crate::ledger), under the ledger's lock).
pub(crate) fn object_counters(kind: Kind) -> (&'static AtomicU64, &'static AtomicU64) {
    match kind {
        Kind::Runtime => (&RUNTIMES_ALIVE, &RUNTIMES_CREATED),
        Kind::Context => (&CONTEXTS_ALIVE, &CONTEXTS_CREATED),
        Kind::Graph => (&GRAPHS_ALIVE, &GRAPHS_CREATED),
    }
}

pub(crate) fn record_execute(ns: u64, failed: bool) {
    EXECUTES.fetch_add(1, Relaxed);
    if failed {
        EXECUTE_ERRORS.fetch_add(1, Relaxed);
    }
    EXECUTE_NS_TOTAL.fetch_add(ns, Relaxed);
    EXECUTE_NS_LAST.store(ns, Relaxed);
}

pub(crate) fn record_release_error() {
    RELEASE_ERRORS.fetch_add(1, Relaxed);
}

/// Waits until no load, free or close handed to a runtime's thread is pending, for at most
/// `timeout`; whether that happened. Frees run on those threads, so a test that drops objects
/// and then checks the `*_alive` counters calls this first.
pub fn settle(timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while crate::owner::pending() > 0 {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}
