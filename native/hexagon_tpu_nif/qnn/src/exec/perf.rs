//! Performance modes: votes on the HTP's power state through the backend's perf infrastructure
//! (`deviceGetInfrastructure` → `createPowerConfigId`, `setPowerConfig`,
//! `destroyPowerConfigId`).
//!
//! Each runtime has one `Voter`: a power config id created on its owner thread right after
//! the device (device 0, core 0, as ONNX Runtime's QNN EP does), the runtime's own mode, the
//! mode a call asked for, and the parameters of the vote in force (kept so that a recovery
//! after a DSP restart can replay them, as Qualcomm's HTP library does with its own DCVS v3
//! votes: `Voter::replay`). The id is destroyed on the owner thread when the runtime's
//! handles are freed, before the device.
//!
//! No vote is sent twice: a vote goes to the backend only when the mode wanted differs from the
//! mode last voted, so back-to-back executes with one mode cost no RPC after the first
//! (onnxruntime-qnn PR #781 fixes the opposite: a `setPowerConfig` on every inference). A call
//! that asks for another mode than its runtime's votes it before its execute and keeps it while
//! calls keep coming; the idle thread votes the runtime's mode again once no call has used the
//! runtime for its idle delay ([`DEFAULT_IDLE`]) and none is running.
//!
//! A vote is a QNN call that crosses to the DSP (an RPC): it runs on the owner thread, on a
//! dirty scheduler or on the idle thread, never on a normal scheduler, and never waits for
//! another caller's vote: whoever holds the vote lock sends the votes wanted meanwhile. A vote the
//! backend refuses fails nothing: it is counted (`performance_votes_refused`), logged once per
//! runtime, and the calls run at the clocks they have.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::SeqCst};
use std::sync::{Arc, Condvar, LazyLock, Mutex, TryLockError, Weak};
use std::time::{Duration, Instant};

use crate::base::error::Result;
use crate::base::exit;
use crate::base::sync::lock;
use crate::ffi::loader::BackendLibrary;
use crate::ffi::log::{self, LogLevel};
use crate::observe::counters;
use crate::sys;

/// How long a call's mode stays voted after the last call that asked for it ended: 300 ms, the
/// release timer onnxruntime-qnn's sustained high performance mode uses (its PR #38). Calls
/// closer together than this cost no vote; a runtime idle for longer goes back to its own mode.
pub const DEFAULT_IDLE: Duration = Duration::from_millis(300);

/// The HTP performance modes, with the DCVS v3 values ONNX Runtime's QNN EP votes for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PerfMode {
    Burst,
    SustainedHighPerformance,
    HighPerformance,
    Balanced,
    LowBalanced,
    PowerSaver,
    LowPowerSaver,
    HighPowerSaver,
    ExtremePowerSaver,
    /// No vote: the DSP's own default clocks.
    Default,
}

impl PerfMode {
    /// Every mode, in the order the documentation lists them.
    pub const ALL: [PerfMode; 10] = [
        PerfMode::Burst,
        PerfMode::SustainedHighPerformance,
        PerfMode::HighPerformance,
        PerfMode::Balanced,
        PerfMode::LowBalanced,
        PerfMode::PowerSaver,
        PerfMode::LowPowerSaver,
        PerfMode::HighPowerSaver,
        PerfMode::ExtremePowerSaver,
        PerfMode::Default,
    ];

    /// The name users give (`"burst"`, ..., `"default"`), ORT's `htp_performance_mode` spelling.
    pub fn name(self) -> &'static str {
        match self {
            PerfMode::Burst => "burst",
            PerfMode::SustainedHighPerformance => "sustained_high_performance",
            PerfMode::HighPerformance => "high_performance",
            PerfMode::Balanced => "balanced",
            PerfMode::LowBalanced => "low_balanced",
            PerfMode::PowerSaver => "power_saver",
            PerfMode::LowPowerSaver => "low_power_saver",
            PerfMode::HighPowerSaver => "high_power_saver",
            PerfMode::ExtremePowerSaver => "extreme_power_saver",
            PerfMode::Default => "default",
        }
    }

    /// The mode named `name`, if any.
    pub fn from_name(name: &str) -> Option<PerfMode> {
        PerfMode::ALL.into_iter().find(|m| m.name() == name)
    }

    fn index(self) -> u8 {
        PerfMode::ALL.iter().position(|&m| m == self).unwrap_or(9) as u8
    }

    fn from_index(index: u8) -> Option<PerfMode> {
        PerfMode::ALL.get(usize::from(index)).copied()
    }

    /// The DCVS v3 config voted for this mode, with `power_config_id` as its `contextId`, or
    /// `None` for [`PerfMode::Default`], which votes nothing.
    ///
    /// The values are ONNX Runtime's: `HtpPowerConfigManager::SetHtpPerformancePowerConfig` in
    /// onnxruntime/core/providers/qnn/builder/qnn_htp_power_config_manager.cc, with the sleep
    /// latencies of onnxruntime/core/providers/qnn/builder/qnn_def.h (`kSleepMinLatency` 40,
    /// `kSleepLowLatency` 100, `kSleepMediumLatency` 1000 µs), in onnxruntime/onnxruntime-qnn
    /// at commit cee6c0d91e583d43f5ecef6391e93c19b4042c0f. ORT has no values for its default
    /// mode (it never votes it; that function refuses it).
    pub fn dcvs_v3(self, power_config_id: u32) -> Option<sys::QnnHtpPerfInfrastructure_DcvsV3_t> {
        use sys::*;
        // (sleep latency µs, dcvsEnable, power mode, the one corner for bus and core)
        let (sleep_latency, dcvs_enable, power_mode, corner) = match self {
            PerfMode::Burst | PerfMode::SustainedHighPerformance => (
                40,
                0,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_MAX_VOLTAGE_CORNER,
            ),
            PerfMode::HighPerformance => (
                100,
                0,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_TURBO,
            ),
            PerfMode::Balanced => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_NOM_PLUS,
            ),
            PerfMode::LowBalanced => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_NOM,
            ),
            PerfMode::HighPowerSaver => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_SVS_PLUS,
            ),
            PerfMode::PowerSaver => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_SVS,
            ),
            PerfMode::LowPowerSaver => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE,
                DCVS_VOLTAGE_VCORNER_SVS2,
            ),
            PerfMode::ExtremePowerSaver => (
                1000,
                1,
                QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_POWER_SAVER_MODE,
                DCVS_VOLTAGE_CORNER_DISABLE,
            ),
            PerfMode::Default => return None,
        };
        Some(QnnHtpPerfInfrastructure_DcvsV3_t {
            contextId: power_config_id,
            setDcvsEnable: 1,
            dcvsEnable: dcvs_enable,
            powerMode: power_mode,
            setSleepLatency: 1,
            sleepLatency: sleep_latency,
            setSleepDisable: 0,
            sleepDisable: 0,
            setBusParams: 1,
            busVoltageCornerMin: corner,
            busVoltageCornerTarget: corner,
            busVoltageCornerMax: corner,
            setCoreParams: 1,
            coreVoltageCornerMin: corner,
            coreVoltageCornerTarget: corner,
            coreVoltageCornerMax: corner,
        })
    }

    /// The RPC polling time ORT sets with this mode, in µs: 9999 (the most the headers allow)
    /// for burst, 0 (no polling) otherwise (qnn_execution_provider.cc, same commit). It is sent
    /// only when it changes. ORT sends an RPC control latency only when its user sets one; so
    /// does nothing here.
    pub fn rpc_polling_time(self) -> u32 {
        match self {
            PerfMode::Burst => sys::QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIG_MAX_RPC_POLLING_TIME,
            _ => 0,
        }
    }
}

/// The parameters of the vote in force on a runtime: what a recovery replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vote {
    pub mode: PerfMode,
    /// The DCVS v3 config sent.
    pub dcvs_v3: sys::QnnHtpPerfInfrastructure_DcvsV3_t,
    /// The RPC polling time in force (µs; 0: none).
    pub rpc_polling_time: u32,
}

/// A runtime's performance state, as `Voter::state` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerfState {
    /// The runtime's own mode.
    pub mode: PerfMode,
    /// The mode last voted (accepted or refused); [`PerfMode::Default`] before any.
    pub voted: PerfMode,
    /// The vote in force, when the backend accepted one and it was not withdrawn.
    pub last_vote: Option<Vote>,
    /// Whether the backend has a perf infrastructure and gave this runtime a power config id.
    pub available: bool,
}

/// A `DCVS_V3` power config.
fn dcvs_config(
    dcvs_v3: sys::QnnHtpPerfInfrastructure_DcvsV3_t,
) -> sys::QnnHtpPerfInfrastructure_PowerConfig_t {
    sys::QnnHtpPerfInfrastructure_PowerConfig_t {
        option: sys::QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_DCVS_V3,
        config: sys::QnnHtpPerfInfrastructure_PowerConfigUnion_t {
            dcvsV3Config: dcvs_v3,
        },
    }
}

/// An `RPC_POLLING_TIME` power config (µs).
fn polling_config(time: u32) -> sys::QnnHtpPerfInfrastructure_PowerConfig_t {
    sys::QnnHtpPerfInfrastructure_PowerConfig_t {
        option: sys::QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_POLLING_TIME,
        config: sys::QnnHtpPerfInfrastructure_PowerConfigUnion_t {
            rpcPollingTimeConfig: time,
        },
    }
}

/// The functions of an HTP backend's perf infrastructure.
#[derive(Clone, Copy)]
struct PerfFns {
    create: sys::QnnHtpPerfInfrastructure_CreatePowerConfigIdFn_t,
    destroy: sys::QnnHtpPerfInfrastructure_DestroyPowerConfigIdFn_t,
    set_power_config: sys::QnnHtpPerfInfrastructure_SetPowerConfigFn_t,
}

/// `deviceGetInfrastructure`'s perf functions, or why there are none.
fn infrastructure(lib: &BackendLibrary) -> std::result::Result<PerfFns, String> {
    let get = lib
        .fns
        .device_get_infrastructure
        .ok_or("the backend has no deviceGetInfrastructure")?;
    let _in_qnn = exit::enter().map_err(|e| e.to_string())?;
    let mut infra: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: the out-pointer is valid for a write of one pointer.
    let status = sys::Status(unsafe { get(&mut infra) });
    lib.check("deviceGetInfrastructure", status)
        .map_err(|e| e.to_string())?;
    if infra.is_null() {
        return Err("deviceGetInfrastructure answered NULL".into());
    }
    // SAFETY: an HTP backend's infrastructure is a `QnnHtpDevice_Infrastructure_t` it owns for
    // its whole life (QnnHtpDevice.h); it is only read, by value.
    let infra = unsafe { infra.cast::<sys::QnnHtpDevice_Infrastructure_t>().read() };
    if infra.infraType != sys::QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF {
        return Err(format!(
            "the infrastructure's type is {}, not the HTP perf infrastructure",
            infra.infraType
        ));
    }
    let perf = infra.perfInfra;
    match (
        perf.createPowerConfigId,
        perf.destroyPowerConfigId,
        perf.setPowerConfig,
    ) {
        (Some(create), Some(destroy), Some(set_power_config)) => Ok(PerfFns {
            create,
            destroy,
            set_power_config,
        }),
        _ => Err("the perf infrastructure lacks a power config function".into()),
    }
}

/// What calls want: decided under a lock held for a few assignments, never across a QNN call.
struct Desire {
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
struct Voted {
    fns: Option<PerfFns>,
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
            match infrastructure(lib) {
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

    fn create_id(&self, fns: &PerfFns) -> std::result::Result<u32, String> {
        let _in_qnn = exit::enter().map_err(|e| e.to_string())?;
        let mut id = 0u32;
        // SAFETY: the out-pointer is valid for a write of a u32; device 0, core 0 as ORT.
        let status = sys::Status(unsafe { (fns.create)(0, 0, &mut id) });
        self.lib
            .check("createPowerConfigId", status)
            .map(|()| id)
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
                    idle_thread().queue(desire.last_call + self.idle, self);
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
        let Ok(_in_qnn) = exit::enter() else {
            return;
        };
        let Some(dcvs_v3) = mode.dcvs_v3(id) else {
            // Default: withdraw whatever is in force by giving the id back and taking a new one,
            // so the DSP runs at its own clocks as before any vote.
            if voted.record.is_some() || voted.polling != 0 {
                // SAFETY: `id` was created by this library and not destroyed.
                let status = sys::Status(unsafe { (fns.destroy)(id) });
                counters::record_performance_vote(!status.is_ok());
                if let Err(error) = self.lib.check("destroyPowerConfigId", status) {
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
        let mut list: Vec<*const sys::QnnHtpPerfInfrastructure_PowerConfig_t> = vec![&dcvs];
        if polling != voted.polling {
            list.push(&polling_config);
        }
        list.push(std::ptr::null());
        match self.send(&fns, id, &list) {
            Ok(()) => {
                voted.polling = polling;
                voted.record = Some(Vote {
                    mode,
                    dcvs_v3,
                    rpc_polling_time: polling,
                });
            }
            Err(why) => self.refused(voted, &why),
        }
    }

    /// One `setPowerConfig`, counted.
    fn send(
        &self,
        fns: &PerfFns,
        id: u32,
        list: &[*const sys::QnnHtpPerfInfrastructure_PowerConfig_t],
    ) -> std::result::Result<(), String> {
        // SAFETY: `list` is a NULL-terminated array of pointers to configs that outlive the
        // call; `id` is a live power config id of this library.
        let status = sys::Status(unsafe { (fns.set_power_config)(id, list.as_ptr()) });
        counters::record_performance_vote(!status.is_ok());
        self.lib
            .check("setPowerConfig", status)
            .map_err(|e| e.to_string())
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
        let _in_qnn = exit::enter()?;
        let dcvs = dcvs_config(record.dcvs_v3);
        let polling = polling_config(record.rpc_polling_time);
        let list = [&raw const dcvs, &raw const polling, std::ptr::null()];
        // SAFETY: as in `send`.
        let status = sys::Status(unsafe { (fns.set_power_config)(id, list.as_ptr()) });
        counters::record_performance_vote(!status.is_ok());
        self.lib.check("setPowerConfig", status)?;
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
        let Ok(_in_qnn) = exit::enter() else {
            return;
        };
        // SAFETY: `id` was created by this library and is destroyed once (taken out above).
        let status = sys::Status(unsafe { (fns.destroy)(id) });
        if self.lib.check("destroyPowerConfigId", status).is_err() {
            counters::record_release_error();
        }
    }

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

/// The one thread that votes runtimes back down to their own mode once idle.
struct IdleThread {
    queue: Mutex<Vec<(Instant, Weak<Voter>)>>,
    wake: Condvar,
}

fn idle_thread() -> &'static IdleThread {
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
    fn queue(&self, at: Instant, voter: &Arc<Voter>) {
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
                        self.wake
                            .wait_timeout(queue, next.saturating_duration_since(now))
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None => self.wake.wait(queue).unwrap_or_else(|e| e.into_inner()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_a_name_and_back() {
        for mode in PerfMode::ALL {
            assert_eq!(PerfMode::from_name(mode.name()), Some(mode));
            assert_eq!(PerfMode::from_index(mode.index()), Some(mode));
        }
        assert_eq!(PerfMode::from_name("turbo"), None);
    }

    #[test]
    fn only_default_votes_nothing_and_only_burst_polls() {
        for mode in PerfMode::ALL {
            assert_eq!(mode.dcvs_v3(7).is_none(), mode == PerfMode::Default);
            assert_eq!(mode.dcvs_v3(7).map_or(7, |d| d.contextId), 7);
            let polls = mode.rpc_polling_time() != 0;
            assert_eq!(polls, mode == PerfMode::Burst, "{mode:?}");
        }
    }
}
