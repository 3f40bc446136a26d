//! The idle thread: votes a runtime back to its own mode once no call has used it for its idle delay.
//!
//! It sits below `voter.rs`: it knows a voter only as an [`IdleCheck`], which `Voter`
//! implements, so the two files do not import each other.

use std::sync::{Arc, Condvar, LazyLock, Mutex, Weak};
use std::time::Instant;

use crate::base::sync::{lock, wait, wait_timeout};

/// What the idle thread asks of a voter it holds (`Voter` implements it).
pub(super) trait IdleCheck: Send + Sync {
    /// Back to the runtime's mode when no call ran for the idle delay (`None`: done with it),
    /// else the time to look again.
    fn idle_check(&self, now: Instant) -> Option<Instant>;
}

/// The one thread that votes runtimes back down to their own mode once idle.
pub(super) struct IdleThread {
    queue: Mutex<Vec<(Instant, Weak<dyn IdleCheck>)>>,
    wake: Condvar,
}

pub(super) fn idle_thread() -> &'static IdleThread {
    static IDLE: LazyLock<&'static IdleThread> = LazyLock::new(|| {
        let idle: &'static IdleThread = Box::leak(Box::new(IdleThread {
            queue: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }));
        // If the thread cannot start, calls' modes stay voted until the runtime's mode changes.
        let _ = std::thread::Builder::new()
            .name("qnn-perf-idle".into())
            .spawn(
                move || {
                    while std::panic::catch_unwind(|| idle.run()).is_err() {}
                },
            );
        idle
    });
    &IDLE
}

impl IdleThread {
    pub(super) fn queue(&self, at: Instant, voter: Weak<dyn IdleCheck>) {
        lock(&self.queue).push((at, voter));
        self.wake.notify_one();
    }

    fn run(&self) {
        loop {
            let mut queue = lock(&self.queue);
            let now = Instant::now();
            let due: Vec<Weak<dyn IdleCheck>> = {
                let (due, later): (Vec<_>, Vec<_>) =
                    queue.drain(..).partition(|(at, _)| *at <= now);
                *queue = later;
                due.into_iter().map(|(_, voter)| voter).collect()
            };
            if due.is_empty() {
                queue = match queue.iter().map(|(at, _)| *at).min() {
                    Some(next) => {
                        wait_timeout(&self.wake, queue, next.saturating_duration_since(now))
                    }
                    None => wait(&self.wake, queue),
                };
                drop(queue);
                continue;
            }
            drop(queue);
            for voter in due {
                if let Some(voter) = voter.upgrade()
                    && let Some(next) = voter.idle_check(now)
                {
                    lock(&self.queue).push((next, Arc::downgrade(&voter)));
                }
            }
        }
    }
}
