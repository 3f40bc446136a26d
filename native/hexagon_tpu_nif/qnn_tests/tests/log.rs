//! QNN's log through the callback: lines formatted from a real `va_list` (qnn_sim
//! calls the callback from C, as QNN does), tagged with their level and library, filtered at the
//! level given to QnnLog_create, and rate-limited; `flush` waits for what was queued. One test:
//! the sink and the limiter are process-wide.

mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::*;
use qnn::Site;
use qnn::log::{BURST, LogLevel, LogRecord, RATE_PER_SECOND};
use qnn::sim_probe::configure;
use qnn::{Context, Runtime, RuntimeConfig};
use qnn_sim::model::TensorSpec;

/// The lines of `lib`, less the runtime's one notice that shared buffers fall back to client
/// buffers (there is no rpcmem library here).
fn lines_of(sink: &Mutex<Vec<LogRecord>>, lib: &std::path::Path) -> Vec<LogRecord> {
    sink.lock()
        .unwrap()
        .iter()
        .filter(|r| r.backend == lib && !r.message.starts_with("hexagon_tpu: shared buffers"))
        .cloned()
        .collect()
}

/// Waits until `pred` holds for the lines of `lib` (the drain thread delivers them).
fn await_lines(
    sink: &Mutex<Vec<LogRecord>>,
    lib: &std::path::Path,
    pred: impl Fn(&[LogRecord]) -> bool,
) -> Vec<LogRecord> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines = lines_of(sink, lib);
        if pred(&lines) || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn log_lines_reach_the_sink_formatted_filtered_and_rate_limited() {
    let sink: Arc<Mutex<Vec<LogRecord>>> = Arc::default();
    let into = Arc::clone(&sink);
    // While the gate is shut the sink holds the drain thread, as a busy VM would.
    let gate: Arc<(Mutex<bool>, Condvar)> = Arc::new((Mutex::new(true), Condvar::new()));
    let held = Arc::clone(&gate);
    qnn::log::set_sink(move |record| {
        let (open, opened) = &*held;
        drop(
            opened
                .wait_while(open.lock().unwrap(), |open| !*open)
                .unwrap(),
        );
        into.lock().unwrap().push(record);
    });
    let model = identity_model(TensorSpec::f32([4]));
    let input = 1.5f32.to_le_bytes().repeat(4);
    let shut = |shut: bool| {
        *gate.0.lock().unwrap() = !shut;
        gate.1.notify_all();
    };

    // flush: the lines QNN logged before it are in the sink when it returns; while the sink
    // holds the drain, it gives up at its timeout.
    let (flush_lib, flushed) = runtime_at(Some(LogLevel::Warn));
    configure(&flush_lib, "log_per_execute", "3").unwrap();
    let (_flush_context, flush_graph) = load(&flushed, &model);
    assert!(
        qnn::log::flush(Duration::from_secs(10)),
        "nothing holds the drain yet"
    );
    shut(true);
    let mut out = vec![0u8; 16];
    flush_graph.execute(&[&input], &mut [&mut out]).unwrap();
    assert!(
        !qnn::log::flush(Duration::from_millis(20)),
        "the sink holds the drain"
    );
    shut(false);
    assert!(qnn::log::flush(Duration::from_secs(10)));
    assert_eq!(
        lines_of(&sink, &flush_lib).len(),
        3,
        "all three, without waiting"
    );

    // Formatting, level and library: three WARN lines per execute.
    let (lib, runtime) = runtime_at(Some(LogLevel::Warn));
    configure(&lib, "log_per_execute", "3").unwrap();
    let (_context, graph) = load(&runtime, &model);
    graph.execute(&[&input], &mut [&mut out]).unwrap();
    let lines = await_lines(&sink, &lib, |l| l.len() >= 3);
    let messages: Vec<&str> = lines.iter().map(|r| r.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "qnn_sim: execute line 0 of graph identity",
            "qnn_sim: execute line 1 of graph identity",
            "qnn_sim: execute line 2 of graph identity",
        ]
    );
    assert!(lines.iter().all(|r| r.level == LogLevel::Warn));

    // A failure is explained at ERROR.
    configure(&lib, "fail_context_create", "1002").unwrap();
    assert!(Context::from_bytes(&runtime, &model, &Site::here()).is_err());
    let lines = await_lines(&sink, &lib, |l| l.len() >= 4);
    assert_eq!(lines[3].level, LogLevel::Error);
    assert_eq!(
        lines[3].message,
        "qnn_sim: contextCreateFromBinary failed with 1002: injected fault"
    );

    // The level given to QnnLog_create filters: at ERROR, no WARN line is produced.
    let (quiet_lib, quiet) = runtime_at(Some(LogLevel::Error));
    configure(&quiet_lib, "log_per_execute", "3").unwrap();
    let (_quiet_context, quiet_graph) = load(&quiet, &model);
    quiet_graph.execute(&[&input], &mut [&mut out]).unwrap();
    configure(&quiet_lib, "fail_context_create", "1002").unwrap();
    assert!(Context::from_bytes(&quiet, &model, &Site::here()).is_err());
    let quiet_lines = await_lines(&sink, &quiet_lib, |l| !l.is_empty());
    assert_eq!(quiet_lines.len(), 1, "{quiet_lines:?}");
    assert_eq!(quiet_lines[0].level, LogLevel::Error);

    // A flood is cut to the burst, and the drop is reported once, not per line.
    let (flood_lib, flood) = runtime_at(Some(LogLevel::Warn));
    configure(&flood_lib, "log_per_execute", "5000").unwrap();
    let (_flood_context, flood_graph) = load(&flood, &model);
    let dropped_before = qnn::counters().log_dropped;
    let started = Instant::now();
    flood_graph.execute(&[&input], &mut [&mut out]).unwrap();
    // The bucket refills while the flood runs (slowly, under qemu): allow for that.
    let refilled = (started.elapsed().as_secs_f64() * f64::from(RATE_PER_SECOND)).ceil() as u64;
    let allowed = u64::from(BURST) + refilled;
    let dropped_after = qnn::counters().log_dropped;
    assert!(dropped_after - dropped_before >= 5000 - allowed);
    let flooded = await_lines(&sink, &flood_lib, |l| l.len() >= 5);
    assert!(
        flooded.len() as u64 <= allowed,
        "{} lines, {allowed} allowed",
        flooded.len()
    );
    let reports = await_lines(&sink, std::path::Path::new(""), |l| {
        l.iter()
            .any(|r| r.message.contains("QNN log line(s) dropped"))
    });
    assert!(reports.iter().any(|r| {
        r.level == LogLevel::Warn
            && r.message
                .ends_with("QNN log line(s) dropped (more than 50/s, bursts of 200)")
    }));
}

fn runtime_at(log_level: Option<LogLevel>) -> (std::path::PathBuf, Arc<Runtime>) {
    let lib = fresh_library();
    let config = RuntimeConfig {
        log_level,
        performance: Default::default(),
        ..config(&lib)
    };
    (lib.clone(), Runtime::new(&config, &Site::here()).unwrap())
}
