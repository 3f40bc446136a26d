//! Process-wide counters: live QNN objects (the leak guard; [`crate::ledger`] says where each
//! live one came from) and execute statistics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The kinds of object the ledger and the `*_alive` counters track.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Runtime,
    Context,
    Graph,
}

/// Declares every counter once: the atomics this module keeps (`kept`; every counter is one, so
/// this leaf module reads no other), the [`Counters`] snapshot with one field each, and
/// [`Counters::fields`], which lists them by name (what the NIF encodes, so the NIF needs no
/// edit). Adding a counter is one line here, a `record_*` function below and its call at the
/// recording site; the Elixir side names the counters too (`HexagonTpu.Native`'s stub list and
/// `HexagonTpu.Stats`' docs), and `test/stats_test.exs` fails until both name exactly these.
macro_rules! counters {
    (
        kept { $( $(#[$kept_doc:meta])* $kept:ident, )* }
    ) => {
        /// The atomics, one per kept counter.
        struct Kept {
            $( $kept: AtomicU64, )*
        }

        static KEPT: Kept = Kept {
            $( $kept: AtomicU64::new(0), )*
        };

        /// A snapshot of the counters.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Counters {
            $( $(#[$kept_doc])* pub $kept: u64, )*
        }

        /// How many counters there are.
        pub const COUNT: usize = [$( stringify!($kept), )*].len();

        /// Reads all counters.
        pub fn counters() -> Counters {
            Counters {
                $( $kept: KEPT.$kept.load(Relaxed), )*
            }
        }

        impl Counters {
            /// Every counter with its name (the field's), in declaration order.
            pub fn fields(&self) -> [(&'static str, u64); COUNT] {
                [
                    $( (stringify!($kept), self.$kept), )*
                ]
            }
        }
    };
}

counters! {
    kept {
        /// Runtimes whose QNN handles are not yet freed.
        runtimes_alive,
        /// Contexts whose QNN handle is not yet freed.
        contexts_alive,
        /// Graph objects not yet dropped or closed.
        graphs_alive,
        runtimes_created,
        contexts_created,
        graphs_created,
        /// Executes QNN answered (`graphExecute` returned, or `graphExecuteAsync` notified),
        /// successful or not; a submission the backend's queue refused is not one.
        executes,
        /// Executes QNN answered with an error.
        execute_errors,
        /// Sum of `execute_ns` (see `execute_ns_last`).
        execute_ns_total,
        /// The latest execute's time in QNN: `graphExecute` alone, or for an execute in the
        /// backend's queue from its submission to its notification (the queue's wait in it).
        execute_ns_last,
        /// QNN free calls that failed (in `close` or in a destructor).
        release_errors,
        /// Executes waiting for their graph's turn now.
        executes_waiting,
        /// Executes refused because their graph's queue was at its limit.
        executes_overloaded,
        /// Executes whose caller gave up (`timeout:`) before the answer was sent.
        executes_timed_out,
        /// Queued executes not run: their caller had died or given up by their turn.
        executes_skipped,
        /// QnnProfile handles created (none while no execute asks for a profile).
        profiles_created,
        /// QnnProfile handles not yet freed.
        profiles_alive,
        /// Executes profiled because of a graph's `profile_every`.
        profile_samples,
        /// Profiled executes whose events could not be read (the execute itself succeeded).
        profile_errors,
        /// Tensors converted on the host for an execute: inputs from f32, outputs to f32.
        tensors_converted,
        /// Sum of the time those conversions took (quantize, dequantize, f16).
        convert_ns_total,
        /// Of `convert_ns_total`, the inputs' share (to the model's types).
        quantize_ns_total,
        /// Of `convert_ns_total`, the outputs' share (to f32).
        dequantize_ns_total,
        /// Performance votes sent to backends (`setPowerConfig`, and withdrawals to
        /// `:default`), accepted or not ([`crate::perf`]).
        performance_votes,
        /// Performance votes refused: by the backend, or for want of its perf infrastructure.
        performance_votes_refused,
        /// Loads, frees and closes handed to runtimes' own threads and not yet done (a handle
        /// whose free is queued is still counted alive).
        runtime_jobs_pending,
        /// Contexts created again from their source after a device reset (SSR) killed them.
        context_recoveries,
        /// Executes answered `:device_reset`: the device was reset and recovering did not help
        /// (it failed, the retry met another reset, or recovery is off).
        device_resets,
        /// Contexts loaded whose executes use shared buffers (rpcmem, registered with QnnMem).
        shared_buffer_contexts,
        /// Contexts that would have used shared buffers (`shared_buffers: :auto`) and use
        /// client buffers, because rpcmem or QnnMem was missing or failed (logged once).
        shared_buffer_fallbacks,
        /// Shared buffers allocated with rpcmem and not yet freed (pooled, in an execute, or
        /// under an output binary).
        shared_buffers_alive,
        /// Shared buffers registered with a context (`QnnMem_register`).
        shared_buffer_registrations,
        /// Bytes handed to QNN in client buffers, which FastRPC copies to the DSP (inputs)
        /// and back (outputs) on the device; none for tensors in shared buffers.
        client_buffer_bytes_total,
        /// Bytes copied on the host for an execute: inputs in the model's type into their
        /// shared buffer, or into the execute for the backend's queue.
        host_copy_bytes_total,
        /// Lines of QNN's log forwarded to the sink.
        log_lines,
        /// Lines of QNN's log dropped (rate limit, full queue, or no sink).
        log_dropped,
    }
}

/// The `*_alive` and `*_created` counters of one kind of object (moved only by
/// [`ledger::Alive`](crate::ledger), under the ledger's lock).
pub(crate) fn object_counters(kind: Kind) -> (&'static AtomicU64, &'static AtomicU64) {
    match kind {
        Kind::Runtime => (&KEPT.runtimes_alive, &KEPT.runtimes_created),
        Kind::Context => (&KEPT.contexts_alive, &KEPT.contexts_created),
        Kind::Graph => (&KEPT.graphs_alive, &KEPT.graphs_created),
    }
}

pub(crate) fn record_execute(ns: u64, failed: bool) {
    KEPT.executes.fetch_add(1, Relaxed);
    if failed {
        KEPT.execute_errors.fetch_add(1, Relaxed);
    }
    KEPT.execute_ns_total.fetch_add(ns, Relaxed);
    KEPT.execute_ns_last.store(ns, Relaxed);
}

pub(crate) fn record_waiting(delta: i64) {
    if delta >= 0 {
        KEPT.executes_waiting.fetch_add(delta as u64, Relaxed);
    } else {
        KEPT.executes_waiting
            .fetch_sub(delta.unsigned_abs(), Relaxed);
    }
}

pub(crate) fn record_overloaded() {
    KEPT.executes_overloaded.fetch_add(1, Relaxed);
}

/// A caller gave up on an execute before its answer was sent.
pub fn record_timed_out() {
    KEPT.executes_timed_out.fetch_add(1, Relaxed);
}

/// A queued execute was not run: its caller had died or given up.
pub fn record_skipped() {
    KEPT.executes_skipped.fetch_add(1, Relaxed);
}

/// A profile handle was created (`true`) or freed (`false`).
pub(crate) fn record_profile_handle(created: bool) {
    if created {
        KEPT.profiles_created.fetch_add(1, Relaxed);
        KEPT.profiles_alive.fetch_add(1, Relaxed);
    } else {
        KEPT.profiles_alive.fetch_sub(1, Relaxed);
    }
}

/// A sampled execute was profiled; `failed` when its events could not be read.
pub(crate) fn record_profile_sample(failed: bool) {
    KEPT.profile_samples.fetch_add(1, Relaxed);
    if failed {
        KEPT.profile_errors.fetch_add(1, Relaxed);
    }
}

/// One tensor converted on the host, taking `ns`: an input (`quantize`) or an output.
pub(crate) fn record_conversion(quantize: bool, ns: u64) {
    KEPT.tensors_converted.fetch_add(1, Relaxed);
    KEPT.convert_ns_total.fetch_add(ns, Relaxed);
    let share = if quantize {
        &KEPT.quantize_ns_total
    } else {
        &KEPT.dequantize_ns_total
    };
    share.fetch_add(ns, Relaxed);
}

/// A performance vote, `refused` or not. A refusal without a backend call (no perf
/// infrastructure) counts as a refused vote too.
pub(crate) fn record_performance_vote(refused: bool) {
    KEPT.performance_votes.fetch_add(1, Relaxed);
    if refused {
        KEPT.performance_votes_refused.fetch_add(1, Relaxed);
    }
}

/// A context was created again after a device reset.
pub(crate) fn record_recovery() {
    KEPT.context_recoveries.fetch_add(1, Relaxed);
}

/// An execute was answered with [`Error::DeviceReset`](crate::Error::DeviceReset).
pub(crate) fn record_device_reset() {
    KEPT.device_resets.fetch_add(1, Relaxed);
}

pub(crate) fn record_release_error() {
    KEPT.release_errors.fetch_add(1, Relaxed);
}

/// Waits until no load, free or close handed to a runtime's thread is pending, for at most
/// `timeout`; whether that happened. Frees run on those threads, so a test that drops objects
/// and then checks the `*_alive` counters calls this first.
pub fn settle(timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while KEPT.runtime_jobs_pending.load(Relaxed) > 0 {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}

/// A job was handed to a runtime's thread (`true`) or finished there (`false`).
pub(crate) fn record_runtime_job(queued: bool) {
    if queued {
        KEPT.runtime_jobs_pending.fetch_add(1, Relaxed);
    } else {
        KEPT.runtime_jobs_pending.fetch_sub(1, Relaxed);
    }
}

/// A context's executes use shared buffers.
pub(crate) fn record_shared_buffer_context() {
    KEPT.shared_buffer_contexts.fetch_add(1, Relaxed);
}

/// A context falls back to client buffers.
pub(crate) fn record_shared_buffer_fallback() {
    KEPT.shared_buffer_fallbacks.fetch_add(1, Relaxed);
}

/// A shared buffer was allocated (`true`) or freed (`false`).
pub(crate) fn record_shared_buffer(allocated: bool) {
    if allocated {
        KEPT.shared_buffers_alive.fetch_add(1, Relaxed);
    } else {
        KEPT.shared_buffers_alive.fetch_sub(1, Relaxed);
    }
}

/// A shared buffer was registered with a context.
pub(crate) fn record_shared_registration() {
    KEPT.shared_buffer_registrations.fetch_add(1, Relaxed);
}

/// `bytes` were handed to QNN in client buffers.
pub(crate) fn record_client_buffer_bytes(bytes: u64) {
    KEPT.client_buffer_bytes_total.fetch_add(bytes, Relaxed);
}

/// `bytes` were copied on the host for an execute.
pub(crate) fn record_host_copy(bytes: u64) {
    KEPT.host_copy_bytes_total.fetch_add(bytes, Relaxed);
}

/// A line of QNN's log was forwarded to the sink.
pub(crate) fn record_log_line() {
    KEPT.log_lines.fetch_add(1, Relaxed);
}

/// A line of QNN's log was dropped.
pub(crate) fn record_log_dropped() {
    KEPT.log_dropped.fetch_add(1, Relaxed);
}
