//! Recovery after a device reset (a DSP subsystem restart, SSR): the context created again
//! from the binary it was loaded from, and the execute that met the reset retried on it.
//!
//! After a reset QNN answers every call on the context, and on its graphs,
//! `QNN_COMMON_ERROR_SYSTEM_COMMUNICATION` (or its fatal variant) until the context is freed
//! and created again (measured on Qualcomm's emulator, forced by a debugger; ONNX Runtime's QNN
//! EP recovers the same way). The execute that meets the reset asks for the recovery
//! ([`ContextCore::recover_from`], through [`Retry::after`]); once nobody uses the dead handle,
//! the runtime's thread frees it and creates the context again from its [`Source`]
//! (`ContextCore::recreate`; the shared pools [`forget`](crate::exec::shared::SharedPool::forget)
//! the dead handle's registrations first); every caller that wanted the handle meanwhile waits
//! for that and then goes on with the new one. Graphs retrieve their handle again at their next
//! use (the handle's generation says it changed: `GraphState::handle_in` in
//! [`crate::exec::graph`]), so the `Graph`s users hold keep working.
//!
//! An execute is retried once ([`Retry`]); one in the backend's asynchronous queue is not
//! retried when QNN notifies the reset, but starts the recovery for the executes after it
//! ([`not_retried`]). The error a caller gets names its graph and is counted ([`answer`]).

use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::{ContextCore, HandleState, RawContext, create_handle};
use crate::base::error::{Error, Result};
use crate::base::sync::{Done, blocking};
use crate::exec::owner::Handles;
use crate::ffi::log::{self, LogLevel};
use crate::model::model_file;
use crate::observe::counters;
use crate::observe::ledger::Alive;
use crate::observe::trace::{self, Phase};
use crate::sys;

/// What a caller is told when the context does not keep its source.
const RECOVERY_OFF: &str = "recovery is off (recover: false); load the model again";

/// A recovery asked for: the callers waiting for it, and whether the owner thread has it.
pub(super) struct Recovery {
    waiters: Vec<Done<()>>,
    started: bool,
}

impl Recovery {
    /// Whether it waits for the last use of the dead handle to end (the owner thread does not
    /// have it yet).
    pub(super) fn waits_for_users(&self) -> bool {
        !self.started
    }
}

/// What a context was loaded from, kept to create it again after a device reset.
pub(super) enum Source {
    /// A file, read again then: it must still hold the same bytes.
    File {
        path: PathBuf,
        len: usize,
        fingerprint: u64,
    },
    /// Bytes given in memory, kept (the ledger counts them:
    /// [`Part::Source`](crate::observe::ledger::Part::Source)).
    Bytes(Arc<Vec<u8>>),
}

impl Source {
    /// The source of `binary`, read from `path` if given, and the binary.
    pub(super) fn of(binary: Vec<u8>, path: Option<&Path>) -> (Source, Arc<Vec<u8>>) {
        match path {
            Some(path) => {
                let source = Source::File {
                    path: path.to_path_buf(),
                    len: binary.len(),
                    fingerprint: fingerprint(&binary),
                };
                (source, Arc::new(binary))
            }
            None => {
                let binary = Arc::new(binary);
                (Source::Bytes(Arc::clone(&binary)), binary)
            }
        }
    }

    /// The binary again, checked against what was loaded.
    fn bytes(&self) -> Result<Arc<Vec<u8>>> {
        match self {
            Source::Bytes(bytes) => Ok(Arc::clone(bytes)),
            Source::File {
                path,
                len,
                fingerprint: loaded,
            } => {
                // No larger than it was: a longer file is a changed one.
                let bytes = model_file::read(path, *len as u64)?;
                if bytes.len() != *len || fingerprint(&bytes) != *loaded {
                    return Err(Error::Io {
                        path: path.clone(),
                        message: "the file changed since the context was loaded from it, so the \
                                  context cannot be created again from it"
                            .into(),
                    });
                }
                Ok(Arc::new(bytes))
            }
        }
    }
}

fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

impl ContextCore {
    /// Whether a device reset can be recovered from here (recovery is on).
    fn recovers(&self) -> bool {
        self.source.is_some()
    }

    /// A device reset killed the handle of `generation`: creates the context again (once
    /// nobody uses the dead handle) unless that was done already; `done` gets the result, on
    /// the owner thread, or here when there is nothing to do.
    pub(super) fn recover_from(&self, generation: u64, done: Done<()>) {
        let mut state = self.lock();
        if state.closing.is_some() {
            drop(state);
            return done(Err(Error::Closed { what: "context" }));
        }
        if let Some(recovery) = &mut state.recovery {
            return recovery.waiters.push(done);
        }
        if state.generation != generation && state.raw.is_some() {
            // Recovered already, since that handle was taken.
            drop(state);
            return done(Ok(()));
        }
        if self.source.is_none() || (state.raw.is_none() && state.down.is_none()) {
            drop(state);
            return done(Err(Error::Closed { what: "context" }));
        }
        state.recovery = Some(Recovery {
            waiters: vec![done],
            started: false,
        });
        if state.users == 0 {
            self.start_recovery(&mut state);
        }
    }

    /// Hands the recovery to the owner thread, with nobody using the dead handle.
    pub(super) fn start_recovery(&self, state: &mut HandleState) {
        let Some(recovery) = &mut state.recovery else {
            return;
        };
        recovery.started = true;
        let dead = state.raw.take();
        // `recover_from` is called only through a live `Arc` (a graph or a call holds one).
        let Some(core) = self.me.upgrade() else {
            return;
        };
        self.runtime
            .owner
            .run(Box::new(move |handles| core.recreate(handles, dead)));
    }

    /// On the owner thread: frees the dead handle and creates the context again from its
    /// source, then answers every caller that waited.
    fn recreate(&self, handles: &mut Handles, dead: Option<RawContext>) {
        let started = Instant::now();
        let span = trace::span(Phase::ContextRecover, &self.name);
        if let Some(dead) = dead {
            // Its registrations die with it; the buffers are registered again in the new one.
            for pool in &self.shared {
                pool.forget();
            }
            // SAFETY: the dead handle came from this backend's contextCreateFromBinary and,
            // taken out of its state with no call using it, is freed exactly once. After a
            // reset QNN frees it (or answers the reset's code, which changes nothing here).
            let _ = unsafe { handles.lib.context_free(dead.0) };
        }
        let created = match &self.source {
            Some(source) => source
                .bytes()
                .and_then(|bytes| create_handle(handles, &bytes, &self.options, self.queue)),
            None => Err(Error::Closed { what: "context" }),
        };
        drop(span);
        let mut state = self.lock();
        let waiters = state.recovery.take().map(|r| r.waiters).unwrap_or_default();
        let answer = match created {
            Ok(raw) => {
                state.raw = Some(raw);
                state.generation += 1;
                state.down = None;
                counters::record_recovery();
                log::notice(
                    LogLevel::Warn,
                    &handles.lib,
                    format!(
                        "hexagon_tpu: the device was reset; context {} created again in {} ms",
                        self.name,
                        started.elapsed().as_millis()
                    ),
                );
                Ok(())
            }
            Err(error) => {
                let why = format!("creating the context again failed: {error}");
                log::notice(
                    LogLevel::Error,
                    &handles.lib,
                    format!(
                        "hexagon_tpu: the device was reset; context {}: {why}",
                        self.name
                    ),
                );
                state.down = Some(why.clone());
                Err(why)
            }
        };
        if state.closing.is_some() && state.users == 0 {
            // Closed meanwhile: free what was made, or just answer.
            let done = state.closing.take();
            if state.raw.is_some() {
                self.free_later(&mut state, done, None);
            } else {
                let alive = std::mem::replace(&mut state.alive, Alive::released());
                drop(alive);
                if let Some(done) = done {
                    done(Ok(()));
                }
            }
        }
        drop(state);
        for waiter in waiters {
            waiter(answer.clone().map_err(|detail| Error::DeviceReset {
                graph: String::new(),
                code: sys::QNN_COMMON_ERROR_SYSTEM_COMMUNICATION,
                detail,
            }));
        }
    }
}

/// An execute's retry after a device reset: once, when its context was created again.
#[derive(Default)]
pub(crate) struct Retry {
    /// How long the caller waited for the recovery, in nanoseconds, when there was one.
    pub recovery_ns: Option<u64>,
}

impl Retry {
    /// An attempt on the context handle of `generation` failed with `error`. When that was a
    /// device reset met for the first time and recovery is on, waits for the context to be
    /// created again and answers `Ok`: the execute is to be retried. Otherwise the execute's
    /// error: `error` itself, or an [`Error::DeviceReset`] (the retry met another reset, or
    /// recovery is off).
    pub(crate) fn after(
        &mut self,
        context: &ContextCore,
        generation: u64,
        error: Error,
    ) -> Result<()> {
        if !error.is_device_reset() {
            return Err(error);
        }
        let reset = |detail: &str| Error::DeviceReset {
            graph: String::new(),
            code: error
                .qnn_code()
                .unwrap_or(sys::QNN_COMMON_ERROR_SYSTEM_COMMUNICATION),
            detail: detail.to_string(),
        };
        if self.recovery_ns.is_some() {
            return Err(reset(
                "the context was created again and the execute retried on it, which met another \
                 reset",
            ));
        }
        if !context.recovers() {
            return Err(reset(RECOVERY_OFF));
        }
        let waited = Instant::now();
        blocking(|done| context.recover_from(generation, done))?;
        self.recovery_ns = Some(u64::try_from(waited.elapsed().as_nanos()).unwrap_or(u64::MAX));
        Ok(())
    }
}

/// QNN notified a device reset (`error`) for an execute of graph `graph` in the backend's
/// queue, on the context handle of `generation`. The execute cannot be submitted again from
/// QNN's thread, which must not wait: it is answered this error (counted), and the recovery
/// starts for the executes after it.
pub(crate) fn not_retried(
    context: &ContextCore,
    generation: u64,
    graph: String,
    error: &Error,
) -> Error {
    let code = error.qnn_code().unwrap_or_default();
    let detail = if context.recovers() {
        context.recover_from(generation, Box::new(|_| {}));
        "an execute in the backend's queue is not retried; the context is being created again \
         for the next"
    } else {
        RECOVERY_OFF
    };
    counters::record_device_reset();
    Error::DeviceReset {
        graph,
        code,
        detail: detail.to_string(),
    }
}

/// An execute's error as its caller gets it: a device reset names the graph, and is counted.
pub(crate) fn answer(error: Error, graph: &str) -> Error {
    if let Error::DeviceReset { .. } = error {
        counters::record_device_reset();
    }
    error.in_graph(graph)
}
