//! The runtime's own thread. QNN ties log, backend and device handles to the thread that created
//! them (the HTP backend reports `No device handles found in current thread` when
//! `QnnDevice_free` runs elsewhere), so each runtime creates them, and every context, on one
//! native thread it owns, and frees them there too. Callers hand it jobs and never wait for it:
//! a job's result travels back through the job's own completion callback.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::base::error::{Error, Result};
use crate::base::exit;
use crate::base::sync::lock;
use crate::exec::perf::{PerfMode, Voter};
use crate::ffi::loader::BackendLibrary;
use crate::ffi::log::LogLevel;
use crate::ffi::platform;
use crate::ffi::platform::DevicePlatform;
use crate::observe::counters;
use crate::observe::ledger::{Alive, Kind};
use crate::observe::trace::{self, Phase};
use crate::sys;

/// The QNN handles of one runtime. They exist only on the owner thread: jobs get them by
/// reference, nothing else ever sees them.
pub(crate) struct Handles {
    pub lib: Arc<BackendLibrary>,
    pub log: sys::Qnn_LogHandle_t,
    pub backend: sys::Qnn_BackendHandle_t,
    pub device: sys::Qnn_DeviceHandle_t,
    /// What the device reported about itself when it was created.
    pub platform: Option<DevicePlatform>,
    /// The runtime's performance votes and its power config id, destroyed with the handles.
    pub voter: Option<Arc<Voter>>,
    /// The runtime's entry in the ledger, released with the handles.
    alive: Alive,
}

/// Work for the owner thread.
pub(crate) type Job = Box<dyn FnOnce(&mut Handles) + Send>;

/// The sending side of a runtime's thread. The thread frees the runtime's handles and ends when
/// the last `Owner` is dropped.
pub(crate) struct Owner {
    jobs: mpsc::Sender<Job>,
    /// What the device reported about itself when the thread created it.
    pub platform: Option<DevicePlatform>,
    /// The runtime's performance votes ([`crate::perf`]).
    pub voter: Arc<Voter>,
}

impl Owner {
    /// Starts the thread, which creates the log, backend and device handles and then reports
    /// to `started` (on the owner thread) with the `Owner` to send it jobs. `started` is always
    /// called exactly once, with an error if the thread or the handles could not be made.
    pub(crate) fn spawn(
        lib: Arc<BackendLibrary>,
        log_level: Option<LogLevel>,
        perf: (PerfMode, Duration),
        (kind, site): (Kind, String),
        started: Box<dyn FnOnce(Result<Owner>) + Send>,
    ) {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let started = Arc::new(Mutex::new(Some(started)));
        let report = Arc::clone(&started);
        let report = move |result: Result<Owner>| {
            if let Some(started) = lock(&report).take() {
                started(result);
            }
        };
        counters::record_runtime_job(true);
        let spawned = std::thread::Builder::new()
            .name("qnn-runtime".into())
            .spawn(move || {
                let created = catch_unwind(AssertUnwindSafe(|| create(&lib, log_level, perf)));
                let mut handles = match created {
                    Ok(Ok(handles)) => handles,
                    Ok(Err(error)) => {
                        counters::record_runtime_job(false);
                        return report(Err(error));
                    }
                    Err(_) => {
                        counters::record_runtime_job(false);
                        return report(Err(Error::Internal {
                            message: "creating the runtime's QNN handles panicked".into(),
                        }));
                    }
                };
                handles.alive = Alive::new(kind, &site, lib.path.display().to_string());
                let Some(voter) = handles.voter.clone() else {
                    // `create` always makes the voter when it succeeds.
                    let _ = handles.free();
                    counters::record_runtime_job(false);
                    return report(Err(Error::Internal {
                        message: "the runtime's handles were made without a voter".into(),
                    }));
                };
                report(Ok(Owner {
                    jobs,
                    platform: handles.platform.clone(),
                    voter,
                }));
                counters::record_runtime_job(false);
                // Ends when every `Owner` is gone: no context or runtime can send more.
                for job in inbox {
                    // A job is this crate's code; a panic in one must not strand the handles.
                    let _ = catch_unwind(AssertUnwindSafe(|| job(&mut handles)));
                    counters::record_runtime_job(false);
                }
                let _ = handles.free();
            });
        if let Err(e) = spawned {
            counters::record_runtime_job(false);
            if let Some(started) = lock(&started).take() {
                started(Err(Error::Internal {
                    message: format!("could not start the runtime's thread: {e}"),
                }));
            }
        }
    }

    /// Queues `job` on the owner thread. Never blocks.
    pub(crate) fn run(&self, job: Job) {
        counters::record_runtime_job(true);
        if self.jobs.send(job).is_err() {
            // Only reachable if the thread died, which `catch_unwind` prevents.
            counters::record_runtime_job(false);
        }
    }
}

/// Creates the handles in order, freeing what exists if a later step fails.
fn create(
    lib: &Arc<BackendLibrary>,
    log_level: Option<LogLevel>,
    (mode, idle): (PerfMode, Duration),
) -> Result<Handles> {
    let _span = trace::span(Phase::RuntimeHandles, &lib.path.to_string_lossy());
    let mut handles = Handles {
        lib: Arc::clone(lib),
        log: std::ptr::null_mut(),
        backend: std::ptr::null_mut(),
        device: std::ptr::null_mut(),
        platform: None,
        voter: None,
        alive: Alive::released(),
    };
    if let Some(level) = log_level
        && lib.has_log()
    {
        let _span = trace::span(Phase::LogCreate, &lib.path.to_string_lossy());
        if let Some(log) = lib.log_create(level) {
            handles.log = log?;
        }
    }
    let backend_span = trace::span(Phase::BackendCreate, &lib.path.to_string_lossy());
    // SAFETY: `log` is NULL or a live log handle of this library.
    let backend = unsafe { lib.backend_create(handles.log) };
    drop(backend_span);
    match backend {
        Ok(backend) => handles.backend = backend,
        Err(error) => {
            let _ = handles.free();
            return Err(error);
        }
    }
    let device_span = lib
        .has_device()
        .then(|| trace::span(Phase::DeviceCreate, &lib.path.to_string_lossy()));
    // SAFETY: as above.
    let device = unsafe { lib.device_create(handles.log) };
    match device {
        Some(Ok(device)) => handles.device = device,
        // Backends without devices (the CPU backend) answer NOT_SUPPORTED; carry on.
        Some(Err(error)) if error.qnn_code() != Some(sys::QNN_COMMON_ERROR_NOT_SUPPORTED) => {
            let _ = handles.free();
            return Err(error);
        }
        _ => {}
    }
    if !handles.device.is_null() {
        handles.platform = platform::device(platform::read(lib, handles.log));
    }
    drop(device_span);
    // The power config id, and the runtime's mode voted (a refusal fails nothing).
    handles.voter = Some(Voter::create(lib, mode, idle));
    // Creating the backend may have registered exit-time destructors of QNN's; ours run first.
    exit::guard_exit();
    Ok(handles)
}

impl Handles {
    /// Frees device, backend and log (the reverse of creation), each at most once.
    /// Once exit has begun nothing is freed: the process's end reclaims the handles.
    pub(crate) fn free(&mut self) -> Result<()> {
        // Once exit has begun nothing is freed (each free below is refused from then on).
        if exit::exiting() {
            return Ok(());
        }
        let lib = Arc::clone(&self.lib);
        let anything = !(self.device.is_null() && self.backend.is_null() && self.log.is_null());
        let _span = anything.then(|| trace::span(Phase::RuntimeFree, &lib.path.to_string_lossy()));
        let mut first_error = None;
        let mut check = |result: Result<()>| match result {
            Err(Error::Exiting) => Err(()),
            Err(error) => {
                counters::record_release_error();
                first_error.get_or_insert(error);
                Ok(())
            }
            Ok(()) => Ok(()),
        };
        // The power config id goes before the device it was made for.
        if let Some(voter) = self.voter.take() {
            voter.destroy();
        }
        let device = std::mem::replace(&mut self.device, std::ptr::null_mut());
        // SAFETY: the device was created on this thread by this library; it was taken out of
        // `self`, so it is freed exactly once.
        if !device.is_null() && check(unsafe { lib.device_free(device) }).is_err() {
            return Ok(());
        }
        let backend = std::mem::replace(&mut self.backend, std::ptr::null_mut());
        // SAFETY: as above, for the backend.
        if !backend.is_null() && check(unsafe { lib.backend_free(backend) }).is_err() {
            return Ok(());
        }
        let log = std::mem::replace(&mut self.log, std::ptr::null_mut());
        // SAFETY: as above, for the log handle.
        if !log.is_null() && check(unsafe { lib.log_free(log) }).is_err() {
            return Ok(());
        }
        self.alive.release();
        first_error.map_or(Ok(()), Err)
    }
}
