//! Whose turn it is to execute a graph. QNN promises nothing about concurrent `graphExecute`
//! calls on one handle, so a graph runs one execute at a time, but nobody waits for a turn on a
//! thread they do not own: an execute that finds the graph busy is queued, and the graph's own
//! worker thread runs the queue in order once the running execute is done. The uncontended
//! execute therefore stays a direct call on the caller's thread.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

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

/// Holding this is having the turn; dropping it passes the turn on.
pub(crate) struct TurnGuard {
    slot: Arc<TurnSlot>,
}

impl TurnSlot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The turn now if the graph is idle; otherwise `later()` is queued and `None` returned.
    pub(crate) fn take_or_queue(
        self: &Arc<Self>,
        later: impl FnOnce() -> Queued,
    ) -> Option<TurnGuard> {
        let mut state = self.lock();
        if state.busy {
            state.queue.push_back(later());
            None
        } else {
            state.busy = true;
            Some(TurnGuard {
                slot: Arc::clone(self),
            })
        }
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

    /// The worker: runs queued work in order, then lets the slot go idle and ends.
    fn drain(self: Arc<Self>) {
        loop {
            let next = {
                let mut state = self.lock();
                match state.queue.pop_front() {
                    Some(next) => next,
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
        let slot = Arc::clone(&self.slot);
        let spawned = std::thread::Builder::new()
            .name("qnn-graph".into())
            .spawn(move || slot.drain());
        if spawned.is_err() {
            // No thread to be had: drain here rather than strand the queue.
            Arc::clone(&self.slot).drain();
        }
    }
}
