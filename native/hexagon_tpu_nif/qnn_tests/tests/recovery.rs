//! Recovery from a device reset (a DSP subsystem restart), on qnn_sim's SSR fault: after the
//! planned execute every context of the device answers `QNN_COMMON_ERROR_SYSTEM_COMMUNICATION`
//! until it is freed and created again, as Qualcomm's runtime does. The execute that meets it
//! is retried once on its context created again from the same source; the `Graph`s already
//! retrieved keep working; a second reset, a failed recreation and `recover: false` answer
//! `Error::DeviceReset`.

mod common;

use std::path::Path;
use std::sync::{Arc, Barrier};

use common::*;
use qnn::context::LoadOptions;
use qnn::{Context, Error, Graph, Runtime, Site, counters, sim_probe};
use qnn_sim::model::TensorSpec;

const SYSTEM_COMMUNICATION: u32 = 1007;
const SYSTEM_COMMUNICATION_FATAL: u32 = 1011;

/// The process-wide counters and ledger these tests compare are shared by every test of the
/// binary: they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn set(lib: &Path, key: &str, value: &str) {
    sim_probe::configure(lib, key, value).expect("knob");
}

fn values(i: usize) -> Vec<f32> {
    let base = i as f32;
    vec![base, base + 0.25, base + 0.5, base + 0.75]
}

/// Executes the identity graph on `values(i)` and checks the outputs.
fn execute_ok(graph: &Graph, i: usize) -> qnn::ExecuteReport {
    let input = f32_bytes(&values(i));
    let mut out = vec![0u8; 16];
    let report = graph
        .execute(&[&input], &mut [&mut out])
        .unwrap_or_else(|e| panic!("execute {i}: {e}"));
    assert_eq!(f32_values(&out), values(i), "execute {i}'s outputs");
    report
}

fn execute(graph: &Graph) -> qnn::Result<qnn::ExecuteReport> {
    let input = f32_bytes(&values(0));
    let mut out = vec![0u8; 16];
    graph.execute(&[&input], &mut [&mut out])
}

fn load_with(runtime: &Arc<Runtime>, model: Vec<u8>, options: LoadOptions) -> Arc<Context> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let done = Box::new(move |result| tx.send(result).unwrap());
    Context::load_with(runtime, model, None, &Site::here(), options, done);
    rx.recv().unwrap().expect("context")
}

#[test]
fn an_execute_that_meets_a_reset_is_retried_on_its_context_created_again() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &identity_model(TensorSpec::f32([4])));
    let before = counters::counters();
    execute_ok(&graph, 0);
    set(&lib, "ssr_after_executes", "1");
    assert_eq!(execute_ok(&graph, 1).recovery_ns, None);
    // The next execute meets the restart, waits for the recovery, and is retried.
    let report = execute_ok(&graph, 2);
    assert!(report.recovery_ns.is_some(), "the report says it recovered");
    assert_eq!(sim_probe::ssr_restarts(&lib).unwrap(), 1);
    // The dead context was freed; the graph (retrieved before) works on the new one.
    assert_eq!(sim_probe::ssr_dead_contexts(&lib).unwrap(), 0);
    for i in 3..6 {
        assert_eq!(execute_ok(&graph, i).recovery_ns, None);
    }
    // A graph retrieved after the recovery shares the same handle.
    let again = Graph::retrieve(&context, "identity", &Site::here()).unwrap();
    execute_ok(&again, 7);
    let after = counters::counters();
    assert_eq!(after.context_recoveries - before.context_recoveries, 1);
    assert_eq!(after.device_resets, before.device_resets);
    // The reset's execute is counted, failed, beside the retry.
    assert_eq!(after.execute_errors - before.execute_errors, 1);
    drop((again, graph));
    context.close().unwrap();
    drop(context);
    drop(runtime);
    assert_all_freed(&lib);
}

#[test]
fn the_fatal_variant_recovers_the_same_way() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let (_context, graph) = load(&runtime, &identity_model(TensorSpec::f32([4])));
    set(&lib, "ssr_code", &SYSTEM_COMMUNICATION_FATAL.to_string());
    set(&lib, "ssr_after_executes", "0");
    assert!(execute_ok(&graph, 1).recovery_ns.is_some());
}

#[test]
fn a_second_reset_on_the_retry_answers_device_reset_and_the_next_execute_recovers() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let (_context, graph) = load(&runtime, &identity_model(TensorSpec::f32([4])));
    let before = counters::counters();
    set(&lib, "ssr_times", "2");
    set(&lib, "ssr_after_executes", "0");
    match execute(&graph) {
        Err(Error::DeviceReset {
            graph: name,
            code,
            detail,
        }) => {
            assert_eq!(name, "identity");
            assert_eq!(code, SYSTEM_COMMUNICATION);
            assert!(detail.contains("retried"), "{detail}");
        }
        other => panic!("expected a device reset, got {other:?}"),
    }
    assert_eq!(sim_probe::ssr_restarts(&lib).unwrap(), 2);
    // The context is dead again; the next execute recovers it and runs.
    assert!(execute_ok(&graph, 3).recovery_ns.is_some());
    let after = counters::counters();
    assert_eq!(after.context_recoveries - before.context_recoveries, 2);
    assert_eq!(after.device_resets - before.device_resets, 1);
}

#[test]
fn a_reset_during_the_recovery_fails_that_execute_and_the_next_tries_again() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &identity_model(TensorSpec::f32([4])));
    // The DSP is still coming back when the context is created again.
    set(&lib, "ssr_fail_creates", "1");
    set(&lib, "ssr_after_executes", "0");
    match execute(&graph) {
        Err(Error::DeviceReset { detail, .. }) => {
            assert!(
                detail.contains("creating the context again failed"),
                "{detail}"
            )
        }
        other => panic!("expected a device reset, got {other:?}"),
    }
    assert_eq!(
        sim_probe::ssr_dead_contexts(&lib).unwrap(),
        0,
        "the dead one was freed"
    );
    // Down: the next execute asks for the recovery again, which works now.
    assert_eq!(execute_ok(&graph, 1).recovery_ns, None);
    execute_ok(&graph, 2);
    context.close().unwrap();
    drop((graph, context, runtime));
    assert_all_freed(&lib);
}

#[test]
fn with_recovery_off_a_reset_answers_device_reset_every_time() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let options = LoadOptions {
        recover: false,
        ..LoadOptions::default()
    };
    let context = load_with(&runtime, identity_model(TensorSpec::f32([4])), options);
    let graph = Graph::retrieve(&context, "identity", &Site::here()).unwrap();
    set(&lib, "ssr_after_executes", "0");
    for _ in 0..2 {
        match execute(&graph) {
            Err(Error::DeviceReset { detail, .. }) => {
                assert!(detail.contains("recover: false"), "{detail}")
            }
            other => panic!("expected a device reset, got {other:?}"),
        }
    }
    assert_eq!(sim_probe::ssr_dead_contexts(&lib).unwrap(), 1);
    // Closing frees the dead context.
    context.close().unwrap();
    drop((graph, context, runtime));
    assert_all_freed(&lib);
    assert_eq!(sim_probe::ssr_dead_contexts(&lib).unwrap(), 0);
}

#[test]
fn a_context_loaded_from_a_file_reads_it_again_and_refuses_a_changed_one() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let dir = std::env::temp_dir().join(format!("qnn_recovery_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("identity.bin");
    let model = identity_model(TensorSpec::f32([4]));
    std::fs::write(&path, &model).unwrap();
    let context = Context::from_file(&runtime, &path, &Site::here()).unwrap();
    let graph = Graph::retrieve(&context, "identity", &Site::here()).unwrap();
    set(&lib, "ssr_after_executes", "0");
    assert!(execute_ok(&graph, 0).recovery_ns.is_some());
    // Another model under the same name: recreating from it would run other graphs.
    let other = identity_model_sleeping(TensorSpec::f32([4]), 1);
    assert_ne!(other, model);
    std::fs::write(&path, &other).unwrap();
    set(&lib, "ssr_after_executes", "0");
    match execute(&graph) {
        Err(Error::DeviceReset { detail, .. }) => {
            assert!(detail.contains("the file changed"), "{detail}")
        }
        other => panic!("expected a device reset, got {other:?}"),
    }
    // Put back, it works again.
    std::fs::write(&path, &model).unwrap();
    execute_ok(&graph, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_recovery_while_other_threads_execute_the_same_graph_and_another_of_its_context() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let model = two_identity_graphs();
    let context = Context::from_bytes(&runtime, &model, &Site::here()).unwrap();
    let a = Graph::retrieve(&context, "a", &Site::here()).unwrap();
    let b = Graph::retrieve(&context, "b", &Site::here()).unwrap();
    let threads = 4;
    let rounds = 50;
    let barrier = Arc::new(Barrier::new(threads));
    let before = counters::counters();
    // Every thread's executes run on both graphs; one restart falls among them.
    set(&lib, "ssr_after_executes", "37");
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let graph = Arc::clone(if t % 2 == 0 { &a } else { &b });
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                (0..rounds)
                    .filter(|i| execute_ok(&graph, t * 1000 + i).recovery_ns.is_some())
                    .count()
            })
        })
        .collect();
    let recovered: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sim_probe::ssr_restarts(&lib).unwrap(), 1);
    assert!(recovered >= 1, "at least the execute that met it recovered");
    let after = counters::counters();
    assert_eq!(after.context_recoveries - before.context_recoveries, 1);
    assert_eq!(after.device_resets, before.device_resets);
    assert_eq!(sim_probe::execute_overlaps(&lib).unwrap(), 0);
    drop((a, b));
    context.close().unwrap();
    drop((context, runtime));
    assert_all_freed(&lib);
}

#[test]
fn a_hundred_recoveries_leak_nothing() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &identity_model(TensorSpec::f32([4])));
    execute_ok(&graph, 0);
    let handles = live_handles(&lib);
    let ledger = qnn::ledger::live().len();
    let before = counters::counters();
    for i in 0..100 {
        set(&lib, "ssr_after_executes", "0");
        assert!(execute_ok(&graph, i).recovery_ns.is_some(), "recovery {i}");
    }
    let after = counters::counters();
    assert_eq!(after.context_recoveries - before.context_recoveries, 100);
    assert_eq!(
        live_handles(&lib),
        handles,
        "qnn_sim's live handles back where they were"
    );
    assert_eq!(sim_probe::ssr_dead_contexts(&lib).unwrap(), 0);
    assert_eq!(qnn::ledger::live().len(), ledger);
    assert_eq!(after.contexts_alive, before.contexts_alive);
    context.close().unwrap();
    drop((graph, context, runtime));
    assert_all_freed(&lib);
}

#[test]
fn closing_a_context_a_reset_killed_frees_it() {
    let _serial = serial();
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &identity_model(TensorSpec::f32([4])));
    set(&lib, "ssr_fail_creates", "1");
    set(&lib, "ssr_after_executes", "0");
    assert!(matches!(execute(&graph), Err(Error::DeviceReset { .. })));
    // Down (its recreation failed): closing has nothing of QNN's to free, and answers.
    context.close().unwrap();
    assert!(matches!(execute(&graph), Err(Error::Closed { .. })));
    drop((graph, context, runtime));
    assert_all_freed(&lib);
}

/// Two identity graphs `a` and `b` in one binary.
fn two_identity_graphs() -> Vec<u8> {
    let spec = TensorSpec::f32([4]);
    let mut builder = qnn_sim::builder::ModelBuilder::new();
    for name in ["a", "b"] {
        builder = builder.graph(name, |g| {
            let x = g.input("x", spec.clone());
            let y = g.identity("y", x, spec.clone());
            g.output(y);
        });
    }
    builder.build().expect("two graphs")
}
