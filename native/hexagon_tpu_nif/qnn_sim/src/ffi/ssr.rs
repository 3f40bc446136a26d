//! A subsystem restart (SSR) of the DSP, as Qualcomm's HTP runtime shows one (measured on the
//! QAIRT 2.51 emulator, forced by a debugger): the execute that meets it answers
//! `QNN_COMMON_ERROR_SYSTEM_COMMUNICATION` (1007; 1011 is the fatal variant), every later call
//! on a context of the device or one of its graphs answers the same at once, and only
//! `contextFree` then `contextCreateFromBinary` of the same binary and `graphRetrieve` make
//! the graphs execute again. `deviceFree` with a dead context still attached answers 0.
//!
//! Knobs (`QnnSim_configure`): `ssr_after_executes` (N: the next N executes run, the one after
//! them restarts the DSP; `off` cancels), `ssr_times` (K: that many executes in a row restart
//! it, each on the contexts made since the last; default 1), `ssr_code` (1007 or 1011) and
//! `ssr_fail_creates` (K: after a restart, the next K `contextCreateFromBinary` answer the SSR
//! code, as while the DSP is still coming back).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use qnn_sys::*;

use super::state::*;

struct Plan {
    /// Executes left before the next restart; `None`: none planned.
    countdown: Option<u64>,
    /// Restarts still to come once the countdown is reached (one per execute).
    times: u32,
    /// What the restart's calls answer.
    code: u32,
    /// `contextCreateFromBinary` calls to refuse after each restart.
    fail_creates: u32,
    /// Refusals left from the latest restart.
    creates_to_fail: u32,
}

impl Plan {
    const fn new() -> Plan {
        Plan {
            countdown: None,
            times: 1,
            code: QNN_COMMON_ERROR_SYSTEM_COMMUNICATION,
            fail_creates: 0,
            creates_to_fail: 0,
        }
    }
}

static PLAN: Mutex<Plan> = Mutex::new(Plan::new());

/// Restarts so far (since the last `reset`).
pub static RESTARTS: AtomicU64 = AtomicU64::new(0);

/// Contexts made dead by a restart, whose handles every call still refuses.
static DEAD_LIVE: AtomicU64 = AtomicU64::new(0);

/// Sets an `ssr_*` knob: `None` when `key` is not one, else whether `value` was valid.
pub fn configure(key: &str, value: &str) -> Option<bool> {
    let value = value.trim();
    let mut plan = lock(&PLAN);
    Some(match key {
        "ssr_after_executes" if value == "off" => {
            plan.countdown = None;
            true
        }
        "ssr_after_executes" => value.parse().map(|n| plan.countdown = Some(n)).is_ok(),
        "ssr_times" => match value.parse::<u32>() {
            Ok(n) if n > 0 => {
                plan.times = n;
                true
            }
            _ => false,
        },
        "ssr_code" => match value.parse::<u32>() {
            Ok(
                code @ (QNN_COMMON_ERROR_SYSTEM_COMMUNICATION
                | QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL),
            ) => {
                plan.code = code;
                true
            }
            _ => false,
        },
        "ssr_fail_creates" => value.parse().map(|n| plan.fail_creates = n).is_ok(),
        _ => return None,
    })
}

/// Forgets every plan and count (the `reset` knob).
pub fn reset() {
    *lock(&PLAN) = Plan::new();
    RESTARTS.store(0, Ordering::SeqCst);
}

/// The code the restart's calls answer, as an error handle.
pub fn code() -> Qnn_ErrorHandle_t {
    err(lock(&PLAN).code)
}

/// Called by every execute that reached a live graph, before it computes: `Some(error)` when
/// this execute meets a planned restart (every context of `device` is dead from now on).
pub fn on_execute(device: u64) -> Option<Qnn_ErrorHandle_t> {
    let code = {
        let mut plan = lock(&PLAN);
        match plan.countdown {
            None => return None,
            Some(0) => {
                plan.times -= 1;
                if plan.times == 0 {
                    plan.countdown = None;
                    plan.times = 1;
                }
                plan.creates_to_fail = plan.fail_creates;
                plan.code
            }
            Some(n) => {
                plan.countdown = Some(n - 1);
                return None;
            }
        }
    };
    RESTARTS.fetch_add(1, Ordering::SeqCst);
    let reg = registry();
    for obj in reg.objects.values() {
        if let Obj::Context(c) = obj
            && c.device == device
            && !c.dead.swap(true, Ordering::SeqCst)
        {
            DEAD_LIVE.fetch_add(1, Ordering::SeqCst);
        }
    }
    Some(err(code))
}

/// Called by `contextCreateFromBinary` once its arguments are valid: `Some(error)` while the
/// DSP is still coming back from a restart.
pub fn on_create() -> Option<Qnn_ErrorHandle_t> {
    let mut plan = lock(&PLAN);
    if plan.creates_to_fail == 0 {
        return None;
    }
    plan.creates_to_fail -= 1;
    Some(err(plan.code))
}

/// A context's dead flag, shared with its graphs.
pub fn is_dead(flag: &AtomicBool) -> bool {
    flag.load(Ordering::SeqCst)
}

/// A dead context was freed.
pub fn freed_dead() {
    DEAD_LIVE.fetch_sub(1, Ordering::SeqCst);
}

/// Dead contexts not freed yet.
pub fn dead_live() -> u64 {
    DEAD_LIVE.load(Ordering::SeqCst)
}
