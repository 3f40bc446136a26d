//! The process-wide counters, checked exactly: this file is its own test binary with a single
//! test, so no other test moves the counters underneath it.

mod common;

use common::*;
use qnn::counters;
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::{DType, Fault, Quant, TensorSpec};

#[test]
fn counters_track_objects_and_executes() {
    let base = counters();
    let (lib, runtime) = runtime();
    let spec = TensorSpec::new(DType::UFixed8, [4]).quant(Quant::per_tensor(1.0, 0));
    let model = ModelBuilder::new()
        .graph("g", |g| {
            let x = g.input("x", spec.clone());
            let y = g.identity("y", x, spec.clone());
            g.output(y);
        })
        .fail_execute(Fault::after(qnn::sys::QNN_GRAPH_ERROR_ABORTED, 3))
        .sleep_ms(1)
        .build()
        .unwrap();
    let (context, graph) = load(&runtime, &model);
    let now = counters();
    assert_eq!(now.runtimes_alive, base.runtimes_alive + 1);
    assert_eq!(now.contexts_alive, base.contexts_alive + 1);
    assert_eq!(now.graphs_alive, base.graphs_alive + 1);
    assert_eq!(now.runtimes_created, base.runtimes_created + 1);
    assert_eq!(now.contexts_created, base.contexts_created + 1);
    assert_eq!(now.graphs_created, base.graphs_created + 1);

    let mut y = [0u8; 4];
    for _ in 0..3 {
        graph.execute(&[&[1, 2, 3, 4]], &mut [&mut y]).unwrap();
    }
    let after_ok = counters();
    assert_eq!(after_ok.executes, base.executes + 3);
    assert_eq!(after_ok.execute_errors, base.execute_errors);
    assert!(
        after_ok.execute_ns_last >= 1_000_000,
        "the backend sleeps 1 ms per execute"
    );
    assert!(after_ok.execute_ns_total >= base.execute_ns_total + 3_000_000);

    let err = graph.execute(&[&[1, 2, 3, 4]], &mut [&mut y]).unwrap_err();
    assert_eq!(err.qnn_code(), Some(qnn::sys::QNN_GRAPH_ERROR_ABORTED));
    let after_err = counters();
    assert_eq!(after_err.executes, base.executes + 4);
    assert_eq!(after_err.execute_errors, base.execute_errors + 1);

    // Input validation failures never reach QNN and are not executes.
    graph.execute(&[], &mut [&mut y]).unwrap_err();
    assert_eq!(counters().executes, base.executes + 4);

    graph.close().unwrap();
    assert_eq!(counters().graphs_alive, base.graphs_alive);
    context.close().unwrap();
    assert_eq!(counters().contexts_alive, base.contexts_alive);
    runtime.close().unwrap();
    let end = counters();
    assert_eq!(end.runtimes_alive, base.runtimes_alive);
    assert_eq!(end.release_errors, base.release_errors);
    assert_all_freed(&lib);

    // Drop-only teardown returns to baseline as well.
    let (lib, runtime) = runtime_pair();
    let (context, graph) = load(&runtime, &model);
    drop((graph, context, runtime));
    // The frees run on the runtime's own thread.
    assert!(qnn::counters::settle(std::time::Duration::from_secs(10)));
    let end = counters();
    assert_eq!(
        (end.runtimes_alive, end.contexts_alive, end.graphs_alive),
        (base.runtimes_alive, base.contexts_alive, base.graphs_alive)
    );
    assert_all_freed(&lib);
}

fn runtime_pair() -> (std::path::PathBuf, std::sync::Arc<qnn::Runtime>) {
    runtime()
}
