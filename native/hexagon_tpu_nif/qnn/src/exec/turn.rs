//! Whose turn it is to execute a graph. QNN promises nothing about concurrent `graphExecute`
//! calls on one handle, so a graph runs one execute at a time, but nobody waits for a turn on a
//! thread they do not own: an execute that finds the graph busy is queued, and the graph's own
//! worker thread runs the queue in order once the running execute is done. The uncontended
//! execute therefore stays a direct call on the caller's thread, unless the caller asks for its
//! work to be queued even then (a caller with a deadline, or an asynchronous execute, must be
//! free to stop waiting). The queue is bounded by each caller's limit: beyond it the work is
//! refused, not queued.
//!
//! The worker stays parked for [`WORKER_IDLE`] after the queue empties, so a stream of queued
//! executes (asynchronous ones, a batch, callers with deadlines) does not start a thread each.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::observe::counters;

/// How long a graph's worker waits for more work before its thread ends.
pub(crate) const WORKER_IDLE: Duration = Duration::from_millis(250);

/// Work that runs while holding the turn.
pub(crate) type Queued = Box<dyn FnOnce() + Send>;

/// The turn of one graph of a context (shared by every `Graph` retrieved for its name: QNN hands
/// out the same handle each time).
#[derive(Default)]
pub(crate) struct TurnSlot {
    state: Mutex<SlotState>,
    /// Signalled when the slot goes idle (for blocking callers).
    idle: Condvar,
    /// Signalled when a parked worker is handed the turn.
    wake: Condvar,
}

#[derive(Default)]
struct SlotState {
    busy: bool,
    queue: VecDeque<Queued>,
    worker: Worker,
}

/// The graph's worker thread.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Worker {
    /// No thread.
    #[default]
    None,
    /// Running queued work, holding the turn.
    Running,
    /// Waiting for work, without the turn.
    Parked,
}

/// How a caller's work may wait for the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePolicy {
    /// Refuse the work when this many are waiting already.
    pub max_waiting: usize,
    /// Queue the work even when the graph is idle, so the caller does not run it itself.
    pub always_queue: bool,
}

impl Default for QueuePolicy {
    fn default() -> Self {
        QueuePolicy {
            max_waiting: usize::MAX,
            always_queue: false,
        }
    }
}

/// What became of work offered to [`TurnSlot::take_or_queue`].
pub(crate) enum Taken {
    /// The graph was idle: the caller has the turn.
    Now(TurnGuard),
    /// Queued: the graph's worker runs it with the turn.
    Queued,
    /// Refused: this many were waiting, the caller's limit.
    Full { waiting: usize },
}

/// Holding this is having the turn; dropping it passes the turn on.
pub(crate) struct TurnGuard {
    slot: Arc<TurnSlot>,
}

impl TurnSlot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The turn now if the graph is idle (and the policy lets the caller run it); otherwise
    /// `later()` is queued, or refused when the policy's limit of waiting work is reached.
    pub(crate) fn take_or_queue(
        self: &Arc<Self>,
        later: impl FnOnce() -> Queued,
        policy: QueuePolicy,
    ) -> Taken {
        let mut state = self.lock();
        if !state.busy {
            state.busy = true;
            if !policy.always_queue {
                return Taken::Now(TurnGuard {
                    slot: Arc::clone(self),
                });
            }
            // Idle, but the caller asked not to run it: the worker takes the turn now (the work
            // waits for nobody, so the limit does not apply).
            state.queue.push_back(later());
            counters::record_waiting(1);
            self.hand_to_worker(state);
            return Taken::Queued;
        }
        if state.queue.len() >= policy.max_waiting {
            return Taken::Full {
                waiting: state.queue.len(),
            };
        }
        state.queue.push_back(later());
        counters::record_waiting(1);
        Taken::Queued
    }

    /// Waits for the turn (callers that own their thread, such as Rust users of this crate).
    pub(crate) fn take_blocking(self: &Arc<Self>) -> TurnGuard {
        let mut state = self.lock();
        while state.busy {
            state = self.idle.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.busy = true;
        TurnGuard {
            slot: Arc::clone(self),
        }
    }

    /// Gives the turn (taken, with work queued) to the worker: wakes it when parked, starts it
    /// when there is none.
    fn hand_to_worker(self: &Arc<Self>, mut state: MutexGuard<'_, SlotState>) {
        match state.worker {
            Worker::Parked => {
                state.worker = Worker::Running;
                self.wake.notify_one();
            }
            Worker::None => {
                state.worker = Worker::Running;
                drop(state);
                self.start_worker();
            }
            // It holds the turn and finds the work when it looks at the queue again.
            Worker::Running => {}
        }
    }

    /// Starts the worker (the turn is taken and the worker marked running).
    fn start_worker(self: &Arc<Self>) {
        let slot = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("qnn-graph".into())
            .spawn(move || slot.work(true));
        if spawned.is_err() {
            // No thread to be had: drain here rather than strand the queue, then let it go.
            Arc::clone(self).work(false);
        }
    }

    /// The worker: runs queued work in order while holding the turn; when the queue is empty it
    /// lets the turn go and, if `park`, waits up to [`WORKER_IDLE`] to be handed it again.
    fn work(self: Arc<Self>, park: bool) {
        let mut state = self.lock();
        loop {
            if let Some(next) = state.queue.pop_front() {
                counters::record_waiting(-1);
                drop(state);
                // A panic in queued work is answered by the work's own guards (its reply); the
                // queue goes on, or every later execute on the graph would wait forever.
                let _ = catch_unwind(AssertUnwindSafe(next));
                state = self.lock();
                continue;
            }
            state.busy = false;
            self.idle.notify_all();
            if !park {
                state.worker = Worker::None;
                return;
            }
            state.worker = Worker::Parked;
            let (woken, _) = self
                .wake
                .wait_timeout_while(state, WORKER_IDLE, |s| s.worker == Worker::Parked)
                .unwrap_or_else(|e| e.into_inner());
            state = woken;
            if state.worker == Worker::Parked {
                // Nobody came: the thread ends (the next queued work starts another).
                state.worker = Worker::None;
                return;
            }
        }
    }
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        let mut state = self.slot.lock();
        if state.queue.is_empty() {
            state.busy = false;
            self.slot.idle.notify_all();
            return;
        }
        // Queued work goes next, on the graph's worker; the turn stays taken meanwhile.
        self.slot.hand_to_worker(state);
    }
}
