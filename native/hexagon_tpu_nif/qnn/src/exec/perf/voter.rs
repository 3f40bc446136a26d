//! A runtime's voter: what calls want, what was voted, and sending a vote only when they differ.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::SeqCst};
use std::sync::{Arc, Mutex, TryLockError, Weak};
use std::time::{Duration, Instant};

use super::idle::{IdleCheck, idle_thread};
use super::mode::*;
use super::power::*;
use crate::base::error::{Error, Result};
use crate::base::sync::lock;
use crate::ffi::calls::perf::PerfInfrastructure;
use crate::ffi::loader::BackendLibrary;
use crate::ffi::log::{self, LogLevel};
use crate::observe::counters;
use crate::sys;

/// What calls want: decided under a lock held for a few assignments, never across a QNN call.
pub(super) struct Desire {
    runtime_mode: PerfMode,
    /// The mode the latest call asked for, when it differs from the runtime's; cleared by the
    /// idle thread.
    call_mode: Option<PerfMode>,
    /// Calls between [`Voter::enter`] and [`Voter::leave`].
    in_flight: u32,
    last_call: Instant,
    /// Whether the idle thread has this voter queued.
    idle_queued: bool,
}

impl Desire {
    fn wanted(&self) -> PerfMode {
        self.call_mode.unwrap_or(self.runtime_mode)
    }
}

/// What was voted: held while a vote is sent.
pub(super) struct Voted {
    fns: Option<PerfInfrastructure>,
    /// The power config id; `None` when there is none (no infrastructure, creation refused, or
    /// destroyed with the runtime).
    id: Option<u32>,
    /// Set when the runtime's handles are freed: nothing is voted any more.
    closed: bool,
    polling: u32,
    record: Option<Vote>,
    refusal_logged: bool,
    /// Why there is no power config id, when there is none.
    unavailable: Option<String>,
}

/// One runtime's votes (see the module documentation).
pub(crate) struct Voter {
    lib: Arc<BackendLibrary>,
    idle: Duration,
    desire: Mutex<Desire>,
    voted: Mutex<Voted>,
    /// The mode last voted, accepted or refused ([`PerfMode::index`]): the fast path compares
    /// with it without the vote lock.
    settled: AtomicU8,
    /// The runtime's mode, readable without a lock.
    mode: AtomicU8,
    /// `voted.closed`, readable without the vote lock.
    closed: AtomicBool,
    /// The vote in force and whether there is a power config id, copied out of `voted` after
    /// each change, so that reading them never waits for a vote being sent.
    shown: Mutex<(Option<Vote>, bool)>,
}

impl Voter {
    /// Makes the runtime's power config id and votes its mode. On the owner thread, right
    /// after the device. Refusals are counted and logged; the runtime is made either way.
    pub(crate) fn create(lib: &Arc<BackendLibrary>, mode: PerfMode, idle: Duration) -> Arc<Voter> {
        let voter = Arc::new(Voter {
            lib: Arc::clone(lib),
            idle,
            desire: Mutex::new(Desire {
                runtime_mode: mode,
                call_mode: None,
                in_flight: 0,
                last_call: Instant::now(),
                idle_queued: false,
            }),
            voted: Mutex::new(Voted {
                fns: None,
                id: None,
                closed: false,
                polling: 0,
                record: None,
                refusal_logged: false,
                unavailable: None,
            }),
            settled: AtomicU8::new(PerfMode::Default.index()),
            mode: AtomicU8::new(mode.index()),
            closed: AtomicBool::new(false),
            shown: Mutex::new((None, false)),
        });
        {
            let mut voted = lock(&voter.voted);
            match lib.perf_infrastructure() {
                Ok(fns) => {
                    voted.fns = Some(fns);
                    match voter.create_id(&fns) {
                        Ok(id) => voted.id = Some(id),
                        Err(why) => voted.unavailable = Some(why),
                    }
                }
                Err(why) => voted.unavailable = Some(why),
            }
            voter.publish(&voted);
        }
        voter.settle();
        voter
    }

    fn create_id(&self, fns: &PerfInfrastructure) -> std::result::Result<u32, String> {
        fns.create_power_config_id(&self.lib)
            .map_err(|e| e.to_string())
    }

    /// The mode a call runs at: called before the execute, with the call's mode (`None`: the
    /// runtime's). Touches a short lock only; `true` when a vote must be sent first
    /// ([`Voter::settle`], on a dirty scheduler). Every `enter` is paired with a [`leave`].
    ///
    /// [`leave`]: Voter::leave
    pub(crate) fn enter(self: &Arc<Self>, mode: Option<PerfMode>) -> bool {
        let wanted = {
            let mut desire = lock(&self.desire);
            desire.in_flight += 1;
            desire.last_call = Instant::now();
            if let Some(mode) = mode {
                desire.call_mode = (mode != desire.runtime_mode).then_some(mode);
                if desire.call_mode.is_some() && !desire.idle_queued {
                    desire.idle_queued = true;
                    let voter: Weak<dyn IdleCheck> = Arc::<Voter>::downgrade(self);
                    idle_thread().queue(desire.last_call + self.idle, voter);
                }
            }
            desire.wanted()
        };
        wanted.index() != self.settled.load(SeqCst)
    }

    /// The call that [`Voter::enter`]ed is done.
    pub(crate) fn leave(&self) {
        let mut desire = lock(&self.desire);
        desire.in_flight = desire.in_flight.saturating_sub(1);
        desire.last_call = Instant::now();
    }

    /// Changes the runtime's own mode and votes it unless a call's mode is in force.
    pub(crate) fn set_mode(&self, mode: PerfMode) {
        lock(&self.desire).runtime_mode = mode;
        self.mode.store(mode.index(), SeqCst);
        self.settle();
    }

    /// Sends the votes wanted until what is voted is what is wanted. Never waits for another
    /// caller's vote: when one is being sent, its sender sends this one after it.
    pub(crate) fn settle(&self) {
        loop {
            let mut voted = match self.voted.try_lock() {
                Ok(voted) => voted,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            };
            loop {
                let wanted = lock(&self.desire).wanted();
                if voted.closed || wanted.index() == self.settled.load(SeqCst) {
                    break;
                }
                self.vote(&mut voted, wanted);
            }
            drop(voted);
            // A wish made while the lock was held, after the last look, is sent by whoever
            // takes the lock next: this caller, unless another already has.
            let wanted = lock(&self.desire).wanted();
            if wanted.index() == self.settled.load(SeqCst) || self.closed.load(SeqCst) {
                return;
            }
        }
    }

    /// Sends one vote (the vote lock held) and shows its outcome.
    fn vote(&self, voted: &mut Voted, mode: PerfMode) {
        self.vote_unshown(voted, mode);
        self.publish(voted);
    }

    fn publish(&self, voted: &Voted) {
        *lock(&self.shown) = (voted.record, voted.id.is_some());
    }

    fn vote_unshown(&self, voted: &mut Voted, mode: PerfMode) {
        self.settled.store(mode.index(), SeqCst);
        let (Some(fns), Some(id)) = (voted.fns, voted.id) else {
            // Nothing to vote with: a refusal like any other (the CPU backend has no
            // infrastructure; withdrawing nothing is no vote).
            if mode != PerfMode::Default {
                counters::record_performance_vote(true);
                let why = voted.unavailable.clone().unwrap_or_default();
                self.refused(voted, &why);
            }
            return;
        };
        let Some(dcvs_v3) = mode.dcvs_v3(id) else {
            // Default: withdraw whatever is in force by giving the id back and taking a new one,
            // so the DSP runs at its own clocks as before any vote.
            if voted.record.is_some() || voted.polling != 0 {
                // SAFETY: `id` was created by this infrastructure and not destroyed.
                let destroyed = unsafe { fns.destroy_power_config_id(&self.lib, id) };
                let Some(destroyed) = counted(destroyed) else {
                    return;
                };
                if let Err(error) = destroyed {
                    self.refused(voted, &error.to_string());
                }
                voted.record = None;
                voted.polling = 0;
                voted.id = match self.create_id(&fns) {
                    Ok(id) => Some(id),
                    Err(why) => {
                        voted.unavailable = Some(why);
                        None
                    }
                };
            }
            return;
        };
        let polling = mode.rpc_polling_time();
        let (dcvs, polling_config) = (dcvs_config(dcvs_v3), polling_config(polling));
        let configs: &[&sys::QnnHtpPerfInfrastructure_PowerConfig_t] = if polling != voted.polling {
            &[&dcvs, &polling_config]
        } else {
            &[&dcvs]
        };
        // SAFETY: `id` was created by this infrastructure and not destroyed.
        let sent = unsafe { fns.set_power_config(&self.lib, id, configs) };
        let Some(sent) = counted(sent) else {
            return;
        };
        match sent {
            Ok(()) => {
                voted.polling = polling;
                voted.record = Some(Vote {
                    mode,
                    dcvs_v3,
                    rpc_polling_time: polling,
                });
            }
            Err(error) => self.refused(voted, &error.to_string()),
        }
    }

    /// A vote that could not be made: logged once per runtime (counted by the caller).
    fn refused(&self, voted: &mut Voted, why: &str) {
        if !voted.refusal_logged {
            voted.refusal_logged = true;
            log::notice(
                LogLevel::Warn,
                &self.lib,
                format!(
                    "a performance vote was refused; the runtime runs at the clocks it has \
                     (counted in performance_votes_refused, logged once per runtime): {why}"
                ),
            );
        }
    }

    /// Sends the vote in force again (after a DSP restart, whose recovery replays votes).
    /// `Ok(false)` when there is none to send.
    pub(crate) fn replay(&self) -> Result<bool> {
        let voted = lock(&self.voted);
        let (Some(fns), Some(id), Some(record)) = (voted.fns, voted.id, voted.record) else {
            return Ok(false);
        };
        let dcvs = dcvs_config(record.dcvs_v3);
        let polling = polling_config(record.rpc_polling_time);
        // SAFETY: `id` was created by this infrastructure and not destroyed.
        let sent = unsafe { fns.set_power_config(&self.lib, id, &[&dcvs, &polling]) };
        counted(sent).unwrap_or(Err(Error::Exiting))?;
        Ok(true)
    }

    /// The runtime's mode, the mode voted and the vote in force. Never waits for a vote.
    pub(crate) fn state(&self) -> PerfState {
        let (last_vote, available) = *lock(&self.shown);
        PerfState {
            mode: self.mode(),
            voted: PerfMode::from_index(self.settled.load(SeqCst)).unwrap_or(PerfMode::Default),
            last_vote,
            available,
        }
    }

    /// The runtime's own mode (atomics only).
    pub(crate) fn mode(&self) -> PerfMode {
        PerfMode::from_index(self.mode.load(SeqCst)).unwrap_or(PerfMode::Default)
    }

    /// Destroys the power config id: on the owner thread, when the handles are freed (waits for
    /// a vote being sent: the owner thread is a native thread). Skipped once exit has begun.
    pub(crate) fn destroy(&self) {
        let mut voted = lock(&self.voted);
        voted.closed = true;
        self.closed.store(true, SeqCst);
        voted.record = None;
        let id = voted.id.take();
        self.publish(&voted);
        let (Some(fns), Some(id)) = (voted.fns, id) else {
            return;
        };
        // SAFETY: `id` was created by this infrastructure and is destroyed once (taken out
        // above).
        match unsafe { fns.destroy_power_config_id(&self.lib, id) } {
            // Skipped once exit has begun.
            Ok(()) | Err(Error::Exiting) => {}
            Err(_) => counters::record_release_error(),
        }
    }
}

impl IdleCheck for Voter {
    /// The idle thread's look at this voter: back to the runtime's mode when no call ran for the
    /// idle delay, else the time to look again.
    fn idle_check(&self, now: Instant) -> Option<Instant> {
        {
            let mut desire = lock(&self.desire);
            if desire.call_mode.is_none() {
                desire.idle_queued = false;
                return None;
            }
            if desire.in_flight > 0 {
                return Some(now + self.idle);
            }
            let due = desire.last_call + self.idle;
            if now < due {
                return Some(due);
            }
            desire.call_mode = None;
            desire.idle_queued = false;
        }
        self.settle();
        None
    }
}

/// A vote's outcome, counted in the counters (sent, or refused); `None` when it was not sent
/// because exit has begun, which is no vote.
fn counted(result: Result<()>) -> Option<Result<()>> {
    if matches!(result, Err(Error::Exiting)) {
        return None;
    }
    counters::record_performance_vote(result.is_err());
    Some(result)
}
