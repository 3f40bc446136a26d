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
use crate::ffi::log::{self, LogLevel};
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
    let _in_qnn = exit::enter()?;
    let fns = &lib.fns;
    let mut handles = Handles {
        lib: Arc::clone(lib),
        log: std::ptr::null_mut(),
        backend: std::ptr::null_mut(),
        device: std::ptr::null_mut(),
        platform: None,
        voter: None,
        alive: Alive::released(),
    };
    if let (Some(level), Some(log_create)) = (log_level, fns.log_create) {
        let _span = trace::span(Phase::LogCreate, &lib.path.to_string_lossy());
        let callback = log::callback_for(lib);
        // SAFETY: the callback is a `extern "C"` function with QnnLog_Callback_t's signature that
        // lives for the whole process; `handles.log` is writable.
        let status = sys::Status(unsafe { log_create(callback, level.raw(), &mut handles.log) });
        lib.check("logCreate", status)?;
    }
    let backend_span = trace::span(Phase::BackendCreate, &lib.path.to_string_lossy());
    // SAFETY: `log` is NULL or a live log handle of this library; the out-pointer is valid.
    let status = sys::Status(unsafe {
        (fns.backend_create)(handles.log, std::ptr::null(), &mut handles.backend)
    });
    drop(backend_span);
    if let Err(error) = lib.check("backendCreate", status) {
        handles.backend = std::ptr::null_mut();
        let _ = handles.free();
        return Err(error);
    }
    if let (Some(device_create), Some(_)) = (fns.device_create, fns.device_free) {
        let _span = trace::span(Phase::DeviceCreate, &lib.path.to_string_lossy());
        // SAFETY: as above; a NULL config asks for the default device.
        let status = sys::Status(unsafe {
            device_create(handles.log, std::ptr::null(), &mut handles.device)
        });
        if !status.is_ok() {
            handles.device = std::ptr::null_mut();
        }
        // Backends without devices (the CPU backend) answer NOT_SUPPORTED; carry on.
        if status.code() != sys::QNN_COMMON_ERROR_NOT_SUPPORTED
            && let Err(error) = lib.check("deviceCreate", status)
        {
            let _ = handles.free();
            return Err(error);
        }
        if !handles.device.is_null() {
            handles.platform = platform::device(platform::read(lib, handles.log));
        }
    }
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
        let Ok(_in_qnn) = exit::enter() else {
            return Ok(());
        };
        let lib = Arc::clone(&self.lib);
        let anything = !(self.device.is_null() && self.backend.is_null() && self.log.is_null());
        let _span = anything.then(|| trace::span(Phase::RuntimeFree, &lib.path.to_string_lossy()));
        let fns = lib.fns;
        let mut first_error = None;
        let mut check = |op: &'static str, status: sys::Status| {
            if let Err(error) = lib.check(op, status) {
                counters::record_release_error();
                first_error.get_or_insert(error);
            }
        };
        // The power config id goes before the device it was made for.
        if let Some(voter) = self.voter.take() {
            voter.destroy();
        }
        let device = std::mem::replace(&mut self.device, std::ptr::null_mut());
        if !device.is_null()
            && let Some(device_free) = fns.device_free
        {
            // SAFETY: the device was created on this thread by this library; it was taken out of
            // `self`, so it is freed exactly once.
            check("deviceFree", sys::Status(unsafe { device_free(device) }));
        }
        let backend = std::mem::replace(&mut self.backend, std::ptr::null_mut());
        if !backend.is_null() {
            // SAFETY: as above, for the backend.
            check(
                "backendFree",
                sys::Status(unsafe { (fns.backend_free)(backend) }),
            );
        }
        let log = std::mem::replace(&mut self.log, std::ptr::null_mut());
        if !log.is_null()
            && let Some(log_free) = fns.log_free
        {
            // SAFETY: as above, for the log handle.
            check("logFree", sys::Status(unsafe { log_free(log) }));
        }
        self.alive.release();
        first_error.map_or(Ok(()), Err)
    }
}
