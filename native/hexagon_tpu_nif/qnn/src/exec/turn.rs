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

use crate::base::sync::{lock, wait};
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
        lock(&self.state)
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
            state = wait(&self.idle, state);
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

#[cfg(test)]
mod tests {
    //! The slot on its own: no QNN, no graph. Queued work reports on a channel, so a test waits
    //! for exactly the work it queued (with a bound, so a lost turn fails instead of hanging).

    use super::*;
    use std::sync::mpsc::{Receiver, Sender, channel};
    use std::thread::{self, ThreadId};
    use std::time::Instant;

    const PATIENCE: Duration = Duration::from_secs(10);

    fn slot() -> Arc<TurnSlot> {
        Arc::new(TurnSlot::default())
    }

    fn queue(max_waiting: usize) -> QueuePolicy {
        QueuePolicy {
            max_waiting,
            always_queue: false,
        }
    }

    fn always() -> QueuePolicy {
        QueuePolicy {
            always_queue: true,
            ..QueuePolicy::default()
        }
    }

    /// Work that sends `(n, the thread it ran on)`.
    fn report(tx: &Sender<(u32, ThreadId)>, n: u32) -> impl FnOnce() -> Queued + use<> {
        let tx = tx.clone();
        move || Box::new(move || tx.send((n, thread::current().id())).unwrap())
    }

    /// Offers work that must not be built: the caller runs it itself, or it is refused.
    fn never() -> impl FnOnce() -> Queued {
        || panic!("the work was queued")
    }

    fn next(rx: &Receiver<(u32, ThreadId)>) -> (u32, ThreadId) {
        rx.recv_timeout(PATIENCE).expect("queued work never ran")
    }

    fn worker(slot: &TurnSlot) -> Worker {
        slot.lock().worker
    }

    fn until(what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < PATIENCE, "never: {what}");
            thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn an_idle_graph_gives_the_caller_the_turn() {
        let slot = slot();
        let Taken::Now(guard) = slot.take_or_queue(never(), QueuePolicy::default()) else {
            panic!("an idle graph queued the work");
        };
        assert!(slot.lock().busy);
        // Nobody else gets it meanwhile.
        let (tx, rx) = channel();
        assert!(matches!(
            slot.take_or_queue(report(&tx, 1), QueuePolicy::default()),
            Taken::Queued
        ));
        assert!(
            rx.try_recv().is_err(),
            "queued work ran while the turn was held"
        );
        drop(guard);
        assert_eq!(next(&rx).0, 1);
        // The queue drained, the turn comes back: a direct call again.
        let guard = slot.take_blocking();
        drop(guard);
        assert!(matches!(
            slot.take_or_queue(never(), QueuePolicy::default()),
            Taken::Now(_)
        ));
        assert!(!slot.lock().busy, "the dropped guard kept the turn");
    }

    #[test]
    fn a_busy_graph_queues_in_order_on_its_worker() {
        let slot = slot();
        let Taken::Now(guard) = slot.take_or_queue(never(), QueuePolicy::default()) else {
            panic!("an idle graph queued the work");
        };
        let (tx, rx) = channel();
        for n in 0..5 {
            assert!(matches!(
                slot.take_or_queue(report(&tx, n), QueuePolicy::default()),
                Taken::Queued
            ));
        }
        assert_eq!(slot.lock().queue.len(), 5);
        drop(guard);
        let ran: Vec<_> = (0..5).map(|_| next(&rx)).collect();
        assert_eq!(ran.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        // On one thread, the graph's worker, not this one.
        assert!(ran.iter().all(|r| r.1 == ran[0].1));
        assert_ne!(ran[0].1, thread::current().id());
        // A blocking caller gets the turn once the queue is done.
        drop(slot.take_blocking());
    }

    #[test]
    fn beyond_the_callers_limit_work_is_refused_not_queued() {
        let slot = slot();
        let Taken::Now(guard) = slot.take_or_queue(never(), queue(2)) else {
            panic!("an idle graph queued the work");
        };
        let (tx, rx) = channel();
        for n in 0..2 {
            assert!(matches!(
                slot.take_or_queue(report(&tx, n), queue(2)),
                Taken::Queued
            ));
        }
        // The limit is the caller's: a third with limit 2 is refused (and never built)...
        assert!(matches!(
            slot.take_or_queue(never(), queue(2)),
            Taken::Full { waiting: 2 }
        ));
        assert!(matches!(
            slot.take_or_queue(never(), queue(0)),
            Taken::Full { waiting: 2 }
        ));
        // ...one with limit 3 is queued.
        assert!(matches!(
            slot.take_or_queue(report(&tx, 2), queue(3)),
            Taken::Queued
        ));
        drop(guard);
        assert_eq!((0..3).map(|_| next(&rx).0).collect::<Vec<_>>(), [0, 1, 2]);
        drop(slot.take_blocking());
        assert!(rx.try_recv().is_err(), "refused work ran");
    }

    #[test]
    fn always_queue_runs_on_the_worker_even_when_idle() {
        let slot = slot();
        let (tx, rx) = channel();
        // Idle, and a limit of 0: the work waits for nobody, so it is queued all the same.
        let policy = QueuePolicy {
            max_waiting: 0,
            always_queue: true,
        };
        assert!(matches!(
            slot.take_or_queue(report(&tx, 7), policy),
            Taken::Queued
        ));
        let (n, on) = next(&rx);
        assert_eq!(n, 7);
        assert_ne!(on, thread::current().id(), "the caller ran its own work");
        // While the worker holds the turn, a direct caller queues behind it.
        let guard = slot.take_blocking();
        assert!(matches!(
            slot.take_or_queue(report(&tx, 8), always()),
            Taken::Queued
        ));
        drop(guard);
        assert_eq!(next(&rx).0, 8);
    }

    #[test]
    fn the_worker_parks_then_ends() {
        let slot = slot();
        let (tx, rx) = channel();
        assert!(matches!(
            slot.take_or_queue(report(&tx, 1), always()),
            Taken::Queued
        ));
        let (_, first) = next(&rx);
        // The queue is empty: the worker lets the turn go and parks.
        until("the worker parks", || {
            let state = slot.lock();
            state.worker == Worker::Parked && !state.busy
        });
        // Work within WORKER_IDLE wakes the same thread.
        assert!(matches!(
            slot.take_or_queue(report(&tx, 2), always()),
            Taken::Queued
        ));
        let (_, second) = next(&rx);
        assert_eq!(second, first, "a parked worker was not reused");
        // Nobody comes: the thread ends...
        until("the parked worker ends", || worker(&slot) == Worker::None);
        assert!(!slot.lock().busy);
        // ...and the next queued work starts another.
        assert!(matches!(
            slot.take_or_queue(report(&tx, 3), always()),
            Taken::Queued
        ));
        let (_, third) = next(&rx);
        assert_ne!(third, first, "an ended worker ran work");
    }

    #[test]
    fn a_panic_in_queued_work_is_contained_and_the_queue_goes_on() {
        let slot = slot();
        let Taken::Now(guard) = slot.take_or_queue(never(), QueuePolicy::default()) else {
            panic!("an idle graph queued the work");
        };
        let (tx, rx) = channel();
        assert!(matches!(
            slot.take_or_queue(report(&tx, 0), QueuePolicy::default()),
            Taken::Queued
        ));
        assert!(matches!(
            slot.take_or_queue(
                || Box::new(|| panic!("queued work panics (expected by this test)")),
                QueuePolicy::default()
            ),
            Taken::Queued
        ));
        assert!(matches!(
            slot.take_or_queue(report(&tx, 1), QueuePolicy::default()),
            Taken::Queued
        ));
        drop(guard);
        assert_eq!([next(&rx).0, next(&rx).0], [0, 1]);
        // The turn is free again, and the worker survived to park.
        drop(slot.take_blocking());
        until("the worker parks after the panic", || {
            worker(&slot) == Worker::Parked
        });
        assert!(matches!(
            slot.take_or_queue(report(&tx, 2), always()),
            Taken::Queued
        ));
        assert_eq!(next(&rx).0, 2);
    }
}
