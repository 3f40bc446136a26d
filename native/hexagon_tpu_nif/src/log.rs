//! QNN's log into Logger: `qnn::log` catches each line on QNN's threads and drains them on its
//! own thread, where this sink sends `{:hexagon_tpu_log, level, backend, message}` to the process
//! `HexagonTpu.QnnLog` registered with `log_forward_to/1`.

use std::time::Duration;

use rustler::env::OwnedEnv;
use rustler::{Atom, Encoder, LocalPid};

use crate::atoms;

fn level_atom(level: qnn::LogLevel) -> Atom {
    match level {
        qnn::LogLevel::Error => atoms::error(),
        qnn::LogLevel::Warn => atoms::warning(),
        qnn::LogLevel::Info => atoms::info(),
        qnn::LogLevel::Verbose | qnn::LogLevel::Debug => atoms::debug(),
    }
}

/// Sends every later line of QNN's log to `pid`. Called by `HexagonTpu.QnnLog` when it starts.
#[rustler::nif]
fn log_forward_to(pid: LocalPid) -> Atom {
    qnn::log::set_sink(move |record: qnn::LogRecord| {
        // The sink runs on qnn's drain thread, never on a scheduler.
        let mut env = OwnedEnv::new();
        let _ = env.send_and_clear(&pid, |env| {
            (
                atoms::hexagon_tpu_log(),
                level_atom(record.level),
                record.backend.display().to_string(),
                record.message,
            )
                .encode(env)
        });
    });
    atoms::ok()
}

/// Waits until every line of QNN's log queued before the call has been sent to the process
/// `log_forward_to/1` named, for at most `timeout_ms`; whether it got there. On a dirty I/O
/// scheduler: it waits for the drain thread, never for another caller.
#[rustler::nif(schedule = "DirtyIo")]
fn log_flush(timeout_ms: u64) -> bool {
    qnn::log::flush(Duration::from_millis(timeout_ms))
}
