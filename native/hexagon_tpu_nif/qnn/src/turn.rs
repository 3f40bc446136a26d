//! Whose turn it is to execute a graph. QNN promises nothing about concurrent `graphExecute`
//! calls on one handle, so a graph runs one execute at a time, but nobody waits for a turn on a
//! thread they do not own: an execute that finds the graph busy is queued, and the graph's own
//! worker thread runs the queue in order once the running execute is done. The uncontended
//! execute therefore stays a direct call on the caller's thread, unless the caller asks for its
//! work to be queued even then (a caller with a deadline must be free to stop waiting). The queue
//! is bounded by each caller's limit: beyond it the work is refused, not queued.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::counters;

/// Work that runs while holding the turn.
pub(crate) type Queued = Box<dyn FnOnce() + Send>;

/// The turn of one graph of a context (shared by every `Graph` retrieved for its name: QNN hands
/// out the same handle each time).
#[derive(Default)]
pub(crate) struct TurnSlot {
    state: Mutex<SlotState>,
    /// Signalled when the slot goes idle (for blocking callers).
    idle: Condvar,
}

#[derive(Default)]
struct SlotState {
    busy: bool,
    queue: VecDeque<Queued>,
    /// Whether a worker thread is draining `queue`.
    draining: bool,
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
        if !state.busy && !policy.always_queue {
            state.busy = true;
            return Taken::Now(TurnGuard {
                slot: Arc::clone(self),
            });
        }
        if state.queue.len() >= policy.max_waiting {
            return Taken::Full {
                waiting: state.queue.len(),
            };
        }
        state.queue.push_back(later());
        counters::record_waiting(1);
        if !state.busy {
            // Idle, but the caller asked not to run it: the worker takes the turn now.
            state.busy = true;
            state.draining = true;
            drop(state);
            Arc::clone(self).start_worker();
        }
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

    /// Starts the worker that drains the queue (the turn is taken and `draining` set).
    fn start_worker(self: Arc<Self>) {
        let slot = Arc::clone(&self);
        let spawned = std::thread::Builder::new()
            .name("qnn-graph".into())
            .spawn(move || slot.drain());
        if spawned.is_err() {
            // No thread to be had: drain here rather than strand the queue.
            self.drain();
        }
    }

    /// The worker: runs queued work in order, then lets the slot go idle and ends.
    fn drain(self: Arc<Self>) {
        loop {
            let next = {
                let mut state = self.lock();
                match state.queue.pop_front() {
                    Some(next) => {
                        counters::record_waiting(-1);
                        next
                    }
                    None => {
                        state.busy = false;
                        state.draining = false;
                        self.idle.notify_all();
                        return;
                    }
                }
            };
            // A panic in queued work is answered by the work's own guards (its reply); the
            // queue goes on, or every later execute on the graph would wait forever.
            let _ = catch_unwind(AssertUnwindSafe(next));
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
        if state.draining {
            return;
        }
        state.draining = true;
        drop(state);
        Arc::clone(&self.slot).start_worker();
    }
}
