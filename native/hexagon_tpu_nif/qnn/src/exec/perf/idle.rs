//! The idle thread: votes a runtime back to its own mode once no call has used it for its idle delay.

use std::sync::{Arc, Condvar, LazyLock, Mutex, Weak};
use std::time::Instant;

use super::voter::*;
use crate::base::sync::{lock, wait, wait_timeout};

/// The one thread that votes runtimes back down to their own mode once idle.
pub(super) struct IdleThread {
    queue: Mutex<Vec<(Instant, Weak<Voter>)>>,
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
    pub(super) fn queue(&self, at: Instant, voter: &Arc<Voter>) {
        lock(&self.queue).push((at, Arc::downgrade(voter)));
        self.wake.notify_one();
    }

    fn run(&self) {
        loop {
            let mut queue = lock(&self.queue);
            let now = Instant::now();
            let due: Vec<Weak<Voter>> = {
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
