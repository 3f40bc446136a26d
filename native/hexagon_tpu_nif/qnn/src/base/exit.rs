//! What process exit means for QNN. A VM may stop in any state: models open, executes running or
//! queued, frees on their way to a runtime thread, while its schedulers go on running Erlang code
//! (and garbage collection) until the very end. Racing the QNN libraries' own exit-time
//! destructors with any of that crashes the process.
//!
//! So once exit has begun, this crate stops calling into QNN: every call goes through [`enter`],
//! which refuses new calls from then on, and exit waits (up to [`EXIT_GRACE`]) for the calls in
//! flight to return. QNN's handles are left alive; the process's end reclaims them, as it does
//! the DSP's (the kernel closes the FastRPC session with the process). Then the process ends
//! with the status it was asked for, without running the exit-time destructors of the libraries
//! loaded before the QNN libraries (QNN's among them): they would tear down QNN's state under
//! handles that are still alive, and under QNN's own threads.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};

/// Set once exit has begun; never cleared.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Calls into QNN in progress.
static IN_QNN: AtomicUsize = AtomicUsize::new(0);

/// Longest exit waits for calls into QNN that are in flight (an execute on the device takes
/// milliseconds; Qualcomm's x86 emulator takes up to seconds for a large model).
pub const EXIT_GRACE: Duration = Duration::from_secs(10);

/// Permission to call into QNN, held for the duration of the call; exit waits for it.
#[must_use = "the call into QNN must happen while this is held"]
pub(crate) struct InQnn(());

impl Drop for InQnn {
    fn drop(&mut self) {
        IN_QNN.fetch_sub(1, SeqCst);
    }
}

/// Permission to call into QNN, or [`Error::Exiting`] once exit has begun.
pub(crate) fn enter() -> Result<InQnn> {
    // Counted before the check: exit sets the flag before it reads the count, so either exit
    // sees this call and waits for it, or this call sees the flag and does not happen.
    IN_QNN.fetch_add(1, SeqCst);
    let in_qnn = InQnn(());
    if EXITING.load(SeqCst) {
        return Err(Error::Exiting);
    }
    Ok(in_qnn)
}

/// Whether exit has begun (QNN is no longer called).
pub fn exiting() -> bool {
    EXITING.load(SeqCst)
}

/// Makes exit stop QNN calls before anything of QNN's is torn down. Called after a backend,
/// a context or a graph's first execute is made: exit runs its handlers in the reverse order of
/// registration, and QNN registers destructors of its own as it builds state lazily, so the last
/// registration must be ours. QNN builds that state once per process, so a few registrations
/// cover it; registrations stop after [`MAX_REGISTRATIONS`] (each costs a few bytes in libc's
/// list for the process's lifetime). The handler acts once, whichever registration runs it.
pub(crate) fn guard_exit() {
    if REGISTRATIONS.fetch_add(1, SeqCst) < MAX_REGISTRATIONS {
        // SAFETY: `at_exit` is an `extern "C" fn(c_int, *mut c_void)` that lives for the whole
        // process, ignores its argument and never unwinds.
        unsafe { on_exit(at_exit, std::ptr::null_mut()) };
    }
}

/// How many times [`guard_exit`] registers the exit handler at most.
const MAX_REGISTRATIONS: usize = 1024;
static REGISTRATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" {
    /// glibc's `on_exit(3)`: like `atexit`, but the handler receives the exit status.
    fn on_exit(
        function: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
}

extern "C" fn at_exit(status: libc::c_int, _arg: *mut libc::c_void) {
    static ENDED: AtomicBool = AtomicBool::new(false);
    if ENDED.swap(true, SeqCst) {
        return;
    }
    stop_calls(EXIT_GRACE);
    // Flush C stdio as `exit` would (other libraries' buffered output), then end without the
    // exit-time destructors still to run.
    // SAFETY: fflush(NULL) flushes every open output stream; _exit never returns.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(status)
    }
}

/// Refuses every later call into QNN and waits (up to `grace`) for the calls in flight.
fn stop_calls(grace: Duration) {
    EXITING.store(true, SeqCst);
    let deadline = Instant::now() + grace;
    while IN_QNN.load(SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}
