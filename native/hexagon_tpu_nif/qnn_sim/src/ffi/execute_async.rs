//! `QnnGraph_executeAsync`: each context has one FIFO queue and, from its first asynchronous
//! execute on, one worker thread that runs the queued executes in order and calls each notify
//! callback; the queue depth comes from the context config; freeing the context completes what
//! is still queued with `QNN_GRAPH_ERROR_INVALID_CONTEXT` and joins the worker.
//!
//! Lock order: a queue's lock may be held while the knobs' lock is taken (`knobs()`), never the
//! other way round; the registry's lock is never held while a queue's is taken, and no lock is
//! held while a notify callback runs.

use std::any::Any;
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use qnn_sys::*;

use super::execute::{InFlight, Prepared, lookup_graph, prepare, run};
use super::state::*;

/// The depth a context's queue has when its config does not set one.
pub const DEFAULT_QUEUE_DEPTH: u32 = 8;
/// The deepest queue a context config may ask for: the HTP's documented maximum.
pub const MAX_QUEUE_DEPTH: u32 = 300;

/// Asynchronous executes accepted and not yet notified (queued or running), all contexts.
pub static ASYNC_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);
/// The most there ever were at once.
pub static ASYNC_PEAK_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);
/// Worker threads started and not yet ended (they count as live handles).
pub static ASYNC_WORKERS: AtomicU64 = AtomicU64::new(0);
/// Notify callbacks called, whatever the status.
pub static ASYNC_NOTIFICATIONS: AtomicU64 = AtomicU64::new(0);

/// The `reset` knob's part here: the counters that are not live counts back to zero.
pub fn reset() {
    for c in [&ASYNC_PEAK_IN_FLIGHT, &ASYNC_NOTIFICATIONS] {
        c.store(0, Ordering::SeqCst);
    }
}

/// One accepted asynchronous execute.
struct Job {
    prepared: Prepared,
    notify: Option<Qnn_NotifyFn_t>,
    /// The caller's `notifyParam`, handed back untouched.
    param: usize,
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<Job>,
    /// Accepted and not yet notified: queued, plus the one the worker runs.
    in_flight: u32,
    closed: bool,
    worker: Option<JoinHandle<()>>,
}

thread_local! {
    /// Whether this thread is a queue's worker (`close` does not join itself). A flag with no
    /// destructor: `std::thread::current()` on a caller's thread would register one, from this
    /// library's own std, that runs when that thread ends; a test that unloads its copy of the
    /// library first then has the thread jump into unmapped code (seen under qemu-aarch64).
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// A context's asynchronous execution queue.
pub struct AsyncQueue {
    pub depth: u32,
    state: Mutex<QueueState>,
    changed: Condvar,
}

impl AsyncQueue {
    pub fn new(depth: u32) -> AsyncQueue {
        AsyncQueue {
            depth,
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    /// Accepts a job once fewer than `depth` are in flight: blocks until then (QNN's
    /// documented behaviour), or answers `QNN_GRAPH_ERROR_EXECUTION_ASYNC_FIFO_FULL` with the
    /// `async_queue_full=refuse` knob. A closed queue (its context freed meanwhile) answers
    /// `QNN_GRAPH_ERROR_INVALID_CONTEXT`.
    fn push(self: &Arc<Self>, job: Job) -> Result<(), u32> {
        let mut st = lock(&self.state);
        loop {
            if st.closed {
                return Err(QNN_GRAPH_ERROR_INVALID_CONTEXT);
            }
            if st.in_flight < self.depth {
                break;
            }
            if knobs().async_refuse_when_full {
                return Err(QNN_GRAPH_ERROR_EXECUTION_ASYNC_FIFO_FULL);
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.in_flight += 1;
        st.jobs.push_back(job);
        let now = ASYNC_IN_FLIGHT.fetch_add(1, Ordering::SeqCst) + 1;
        ASYNC_PEAK_IN_FLIGHT.fetch_max(now, Ordering::SeqCst);
        if st.worker.is_none() {
            let queue = Arc::clone(self);
            ASYNC_WORKERS.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name("qnn_sim-async".into())
                .spawn(move || {
                    ON_WORKER.with(|on| on.set(true));
                    queue.work();
                    ASYNC_WORKERS.fetch_sub(1, Ordering::SeqCst);
                });
            match spawned {
                Ok(handle) => st.worker = Some(handle),
                Err(_) => {
                    ASYNC_WORKERS.fetch_sub(1, Ordering::SeqCst);
                    st.jobs.pop_back();
                    st.in_flight -= 1;
                    ASYNC_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
                    return Err(QNN_COMMON_ERROR_SYSTEM);
                }
            }
        }
        self.changed.notify_all();
        Ok(())
    }

    /// The worker: takes the jobs in order; runs each (or, once the queue is closed, answers it
    /// `QNN_GRAPH_ERROR_INVALID_CONTEXT` without running it); frees its slot; then notifies.
    fn work(&self) {
        loop {
            let (job, closed) = {
                let mut st = lock(&self.state);
                loop {
                    if !st.jobs.is_empty() && (st.closed || !knobs().async_paused) {
                        break;
                    }
                    if st.closed {
                        return;
                    }
                    // Paused: look again soon (the knob does not signal the condition variable).
                    st = self
                        .changed
                        .wait_timeout(st, Duration::from_millis(2))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                let closed = st.closed;
                (st.jobs.pop_front().expect("checked non-empty"), closed)
            };
            let status = if closed {
                err(QNN_GRAPH_ERROR_INVALID_CONTEXT)
            } else {
                let delay = knobs().async_delay_ms;
                if delay > 0 {
                    std::thread::sleep(Duration::from_millis(u64::from(delay)));
                }
                run_job(&job.prepared)
            };
            {
                let mut st = lock(&self.state);
                st.in_flight -= 1;
                ASYNC_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
                self.changed.notify_all();
            }
            if let Some(notify) = job.notify {
                ASYNC_NOTIFICATIONS.fetch_add(1, Ordering::SeqCst);
                // SAFETY: the caller's callback, with the caller's parameter, as QNN calls it;
                // no lock of ours is held, so it may call back into the library.
                unsafe {
                    notify(
                        job.param as *mut c_void,
                        Qnn_NotifyStatus_t { error: status },
                    )
                };
            }
        }
    }

    /// Closes the queue: what is still queued is answered `QNN_GRAPH_ERROR_INVALID_CONTEXT`,
    /// an execute already running finishes, and the worker is joined, so no notification of
    /// this queue comes after this returns (unless it is called from a notify callback, on the
    /// worker itself, which then ends after that callback).
    pub fn close(&self) {
        let worker = {
            let mut st = lock(&self.state);
            st.closed = true;
            self.changed.notify_all();
            st.worker.take()
        };
        if let Some(handle) = worker
            && !ON_WORKER.with(Cell::get)
        {
            let _ = handle.join();
        }
    }
}

impl ContextQueue for AsyncQueue {
    fn close(&self) {
        AsyncQueue::close(self);
    }
}

/// Runs one job as `graphExecute` would, the worker's execute counted in `async_running` (a
/// `graphExecute` on the same graph meanwhile is an overlap, as two `graphExecute`s are).
fn run_job(p: &Prepared) -> Qnn_ErrorHandle_t {
    let g = &p.graph;
    g.async_running.fetch_add(1, Ordering::SeqCst);
    if g.running.load(Ordering::SeqCst) > 0 {
        g.async_running.fetch_sub(1, Ordering::SeqCst);
        EXECUTE_OVERLAPS.fetch_add(1, Ordering::SeqCst);
        return err(QNN_GRAPH_ERROR_INVALID_ARGUMENT);
    }
    let _in_flight = InFlight::enter(&g.async_running);
    run(g, p)
}

/// `QnnGraph_executeAsync`. Checks the handle (6001) and the tensors (6004) at once, as
/// `graphExecute` does, and a non-NULL signal (1000); then queues the execute on its context's
/// queue (blocking while the queue is full) and returns. The worker thread runs it (the model's
/// `sleep_ms` and `fail_execute` apply, after the `async_delay_ms` knob's delay) and calls
/// `notify_fn(notify_param, {status})`. A failed call notifies nothing.
///
/// # Safety
/// As `graphExecute`, and the client buffers must stay valid until the notification.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnGraph_executeAsync(
    graph: Qnn_GraphHandle_t,
    inputs: *const Qnn_Tensor_t,
    num_inputs: u32,
    outputs: *mut Qnn_Tensor_t,
    num_outputs: u32,
    _profile: Qnn_ProfileHandle_t,
    signal: Qnn_SignalHandle_t,
    notify_fn: Option<Qnn_NotifyFn_t>,
    notify_param: *mut c_void,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        let g = match lookup_graph(graph) {
            Ok(g) => g,
            Err(e) => return e,
        };
        EXECUTE_COUNT.fetch_add(1, Ordering::SeqCst);
        if !signal.is_null() {
            return err(QNN_COMMON_ERROR_NOT_SUPPORTED);
        }
        // SAFETY: forwarded caller contract for the tensors.
        let prepared = match unsafe { prepare(&g, inputs, num_inputs, outputs, num_outputs) } {
            Ok(p) => p,
            Err(e) => return e,
        };
        let queue: Arc<dyn Any + Send + Sync> = Arc::<dyn ContextQueue>::clone(&g.queue);
        let Ok(queue) = queue.downcast::<AsyncQueue>() else {
            unreachable!("a context's queue is an AsyncQueue (core makes them)")
        };
        let job = Job {
            prepared,
            notify: notify_fn,
            param: notify_param as usize,
        };
        match queue.push(job) {
            Ok(()) => 0,
            Err(code) => err(code),
        }
    })
}
