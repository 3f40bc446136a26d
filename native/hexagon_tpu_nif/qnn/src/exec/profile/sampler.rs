//! A graph's profiler: its handles by level, the asked-for and sampled profiles of each
//! execute (`begin`/`finish`), and the op table the samples add to.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::base::error::Result;
use crate::base::sync::lock;
use crate::exec::runtime::RuntimeCore;
use crate::observe::counters;
use crate::observe::trace::{self, Phase};
use crate::sys;

use super::handle::Handle;
use super::types::*;

/// A graph's profiling: its handles, the sampling interval and the sampled table. The handles
/// are used only by the holder of the graph's turn, so their lock is never contended.
#[derive(Default)]
pub(crate) struct Profiler {
    /// One handle per level, made the first time the level is used.
    handles: Mutex<[Option<Handle>; 3]>,
    /// Profile one execute in this many (0: never).
    every: AtomicU32,
    /// Executes counted for sampling.
    executes: AtomicU64,
    table: Mutex<OpTable>,
}

/// A profile attached to one execute.
pub(crate) struct Active<'p> {
    handles: MutexGuard<'p, [Option<Handle>; 3]>,
    level: Level,
    sampled: bool,
}

impl Active<'_> {
    pub(crate) fn raw(&self) -> sys::Qnn_ProfileHandle_t {
        self.handles[self.level.index()]
            .as_ref()
            .map_or(std::ptr::null_mut(), |h| h.raw.0)
    }
}

impl Profiler {
    /// Profiles one execute in `every` (`None`: stops sampling); creates the detailed handle
    /// now, on the runtime's thread, so that no sampled execute waits for it. The table starts
    /// again empty.
    pub(crate) fn sample_every(
        &self,
        runtime: &Arc<RuntimeCore>,
        every: Option<u32>,
    ) -> Result<()> {
        let every = every.unwrap_or(0);
        if every > 0 {
            self.handle(runtime, Level::Detailed)?;
        }
        *lock(&self.table) = OpTable {
            every,
            ..OpTable::default()
        };
        self.executes.store(0, Relaxed);
        self.every.store(every, Relaxed);
        Ok(())
    }

    /// Creates the handle of `level` if the graph has none yet.
    fn handle(&self, runtime: &Arc<RuntimeCore>, level: Level) -> Result<()> {
        let mut handles = lock(&self.handles);
        if handles[level.index()].is_none() {
            handles[level.index()] = Some(Handle::create(runtime, level)?);
        }
        Ok(())
    }

    /// What the coming execute collects, if anything: the level `asked` (creating its handle if
    /// need be), or a sample when it is the graph's turn for one. With neither, one load.
    pub(crate) fn begin(
        &self,
        runtime: &Arc<RuntimeCore>,
        asked: Option<Level>,
    ) -> Result<Option<Active<'_>>> {
        let every = self.every.load(Relaxed);
        let (level, sampled) = match asked {
            Some(level) => (level, false),
            None if every > 0 => {
                let n = self.executes.fetch_add(1, Relaxed);
                if !n.is_multiple_of(u64::from(every)) {
                    return Ok(None);
                }
                (Level::Detailed, true)
            }
            None => return Ok(None),
        };
        if !sampled {
            self.handle(runtime, level)?;
        }
        let handles = lock(&self.handles);
        if handles[level.index()].is_none() {
            // Sampling was turned on elsewhere without a handle (closed meanwhile): skip.
            return Ok(None);
        }
        Ok(Some(Active {
            handles,
            level,
            sampled,
        }))
    }

    /// Reads the profile of the execute that just succeeded with `active`. A sample is added
    /// to the table; a sample whose events cannot be read is counted and dropped (`None`). An
    /// asked-for profile that cannot be read is the execute's error.
    /// `started` and `execute_ns` are the `graphExecute` call's, for the trace's op spans.
    pub(crate) fn finish(
        &self,
        active: Active<'_>,
        started: Instant,
        execute_ns: u64,
    ) -> Result<Option<Profile>> {
        let Some(handle) = active.handles[active.level.index()].as_ref() else {
            return Ok(None);
        };
        let read = handle.read(active.level, active.sampled);
        drop(active.handles);
        match (read, active.sampled) {
            (Ok(profile), sampled) => {
                if trace::is_on() {
                    trace_ops(&profile, started, execute_ns);
                }
                if sampled {
                    counters::record_profile_sample(false);
                    lock(&self.table).add(&profile);
                }
                Ok(Some(profile))
            }
            (Err(_), true) => {
                counters::record_profile_sample(true);
                Ok(None)
            }
            (Err(error), false) => Err(error),
        }
    }

    /// A copy of the sampled table.
    pub(crate) fn table(&self) -> OpTable {
        lock(&self.table).clone()
    }

    /// Frees the handles (on the owner thread) and stops sampling: the graph is closing.
    pub(crate) fn close(&self) {
        self.every.store(0, Relaxed);
        let handles = std::mem::take(&mut *lock(&self.handles));
        drop(handles);
    }
}

/// Records each op of `profile` in the trace, inside the `graphExecute` call that began at
/// `started` and took `execute_ns`. Ops that report microseconds take them; otherwise (the HTP
/// reports cycles only) the accelerator's time, or the call's, is shared among the ops by their
/// cycles. Either way the ops are laid end to end in the order the backend reported them, from
/// the call's start: the backend gives no op a start time, so the layout shows each op's share,
/// not when it ran.
fn trace_ops(profile: &Profile, started: Instant, execute_ns: u64) {
    let total_cycles: u64 = profile.ops.iter().filter_map(|op| op.cycles).sum();
    let window_ns = profile
        .accelerator_us
        .map_or(execute_ns, |us| us.saturating_mul(1_000).min(execute_ns));
    let mut offset_ns = 0u64;
    for op in &profile.ops {
        let duration_ns = match (op.us, op.cycles) {
            (Some(us), _) => us.saturating_mul(1_000),
            (None, Some(cycles)) if total_cycles > 0 => {
                (u128::from(window_ns) * u128::from(cycles) / u128::from(total_cycles)) as u64
            }
            _ => 0,
        };
        trace::record(Phase::Op, &op.name, started, offset_ns, duration_ns);
        offset_ns = offset_ns.saturating_add(duration_ns);
    }
}
