//! Lifetimes, close semantics and concurrency.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use qnn::Site;
use qnn::{Context, Graph, Runtime};
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::{DType, Quant, TensorSpec};

fn byte_spec(n: u32) -> TensorSpec {
    TensorSpec::new(DType::UFixed8, [n]).quant(Quant::per_tensor(1.0, 0))
}

/// An `add` graph (`y = a + b`, u8, saturating) that sleeps `sleep_ms` in every execute.
fn slow_add_model(graphs: &[&str], sleep_ms: u32) -> Vec<u8> {
    let mut builder = ModelBuilder::new();
    for name in graphs {
        builder = builder.graph(name, |g| {
            let a = g.input("a", byte_spec(4));
            let b = g.input("b", byte_spec(4));
            let y = g.add("y", a, b, byte_spec(4));
            g.output(y);
        });
    }
    builder.sleep_ms(sleep_ms).build().unwrap()
}

fn run_add(graph: &Graph, a: u8, b: u8) -> qnn::Result<[u8; 4]> {
    let mut y = [0u8; 4];
    graph.execute(&[&[a; 4], &[b; 4]], &mut [&mut y])?;
    Ok(y)
}

#[test]
fn closed_objects_report_closed() {
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &slow_add_model(&["g"], 0));
    assert_eq!(run_add(&graph, 1, 2).unwrap(), [3; 4]);

    graph.close().unwrap();
    assert!(graph.is_closed());
    let err = run_add(&graph, 1, 2).unwrap_err();
    assert_eq!(err.reason(), "closed");
    assert_eq!(err.to_string(), "the graph is closed");
    assert_eq!(graph.close().unwrap_err().reason(), "closed");

    let graph = Graph::retrieve(&context, "g", &Site::here()).unwrap();
    context.close().unwrap();
    let err = run_add(&graph, 1, 2).unwrap_err();
    assert_eq!(err.to_string(), "the context is closed");
    assert_eq!(
        Graph::retrieve(&context, "g", &Site::here())
            .unwrap_err()
            .reason(),
        "closed"
    );
    assert_eq!(context.close().unwrap_err().reason(), "closed");
    // Metadata stays readable after close.
    assert_eq!(context.graphs()[0].name, "g");

    runtime.close().unwrap();
    assert_eq!(
        Context::from_bytes(&runtime, &slow_add_model(&["g"], 0), &Site::here())
            .unwrap_err()
            .to_string(),
        "the runtime is closed"
    );
    assert_eq!(runtime.close().unwrap_err().reason(), "closed");
    drop(graph);
    assert_all_freed(&lib);
}

#[test]
fn a_closed_runtime_lives_until_its_last_context_goes() {
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &slow_add_model(&["g"], 0));
    runtime.close().unwrap();
    // log + backend + device + power config id + context stay alive; the context keeps working.
    assert_eq!(live_handles(&lib), 5);
    assert_eq!(run_add(&graph, 2, 2).unwrap(), [4; 4]);
    drop(context);
    assert_eq!(run_add(&graph, 2, 3).unwrap(), [5; 4]);
    drop(graph);
    assert_all_freed(&lib);
}

#[test]
fn dropping_everything_frees_everything() {
    let (lib, runtime) = runtime();
    for _ in 0..20 {
        let (_context, graph) = load(&runtime, &slow_add_model(&["a", "b"], 0));
        run_add(&graph, 1, 1).unwrap();
    }
    drop(runtime);
    assert_all_freed(&lib);
}

#[test]
fn graph_not_found_lists_the_graphs() {
    let (_lib, runtime) = runtime();
    let context = Context::from_bytes(
        &runtime,
        &slow_add_model(&["alpha", "beta"], 0),
        &Site::here(),
    )
    .unwrap();
    let err = Graph::retrieve(&context, "gamma", &Site::here()).unwrap_err();
    assert_eq!(err.reason(), "graph_not_found");
    assert_eq!(
        err.to_string(),
        "graph \"gamma\" does not exist; the context has \"alpha\", \"beta\""
    );
}

/// Runs 6 threads × 10 adds, thread `t` on `graph_for(t)`, checks every result, and checks
/// that qnn_sim never saw two executes in flight at once.
fn assert_serialized(lib: &std::path::Path, graph_for: impl Fn(u8) -> Arc<Graph>) {
    let threads: Vec<_> = (0..6u8)
        .map(|t| {
            let graph = graph_for(t);
            thread::spawn(move || {
                for i in 0..10u8 {
                    assert_eq!(run_add(&graph, t, i).unwrap(), [t + i; 4]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(qnn::sim_probe::execute_overlaps(lib).unwrap(), 0);
    assert_eq!(qnn::sim_probe::peak_concurrent_executes(lib).unwrap(), 1);
}

#[test]
fn concurrent_executes_on_one_graph_never_overlap() {
    let (lib, runtime) = runtime();
    let (_context, graph) = load(&runtime, &slow_add_model(&["g"], 2));
    assert_serialized(&lib, |_| Arc::clone(&graph));
}

#[test]
fn graphs_retrieved_twice_share_one_execute_lock() {
    // QNN returns the same handle for the same name, so two `Graph`s of one name must not run
    // `graphExecute` at the same time either.
    let (lib, runtime) = runtime();
    let context = Context::from_bytes(&runtime, &slow_add_model(&["g"], 2), &Site::here()).unwrap();
    assert_serialized(&lib, |_| {
        Graph::retrieve(&context, "g", &Site::here()).unwrap()
    });
}

#[test]
fn executes_on_different_graphs_run_in_parallel() {
    let (lib, runtime) = runtime();
    let context = Context::from_bytes(
        &runtime,
        &slow_add_model(&["left", "right"], 1000),
        &Site::here(),
    )
    .unwrap();
    let spawn = |name: &str| {
        let graph = Graph::retrieve(&context, name, &Site::here()).unwrap();
        thread::spawn(move || run_add(&graph, 1, 1).unwrap())
    };
    // Start the second execute only once the first is inside the backend, which then sleeps
    // 1 s: a runtime that serialized graphs would make the peak 1.
    let left = spawn("left");
    let deadline = Instant::now() + Duration::from_secs(30);
    while qnn::sim_probe::execute_count(&lib).unwrap() == 0 {
        assert!(
            Instant::now() < deadline,
            "the first execute never reached the backend"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let right = spawn("right");
    assert_eq!(left.join().unwrap(), [2; 4]);
    assert_eq!(right.join().unwrap(), [2; 4]);
    assert_eq!(qnn::sim_probe::peak_concurrent_executes(&lib).unwrap(), 2);
    assert_eq!(qnn::sim_probe::execute_overlaps(&lib).unwrap(), 0);
}

/// Starts a 300 ms execute on another thread and returns once the backend has entered it.
fn start_slow_execute(
    lib: &std::path::Path,
    graph: &Arc<Graph>,
) -> (Instant, thread::JoinHandle<qnn::Result<[u8; 4]>>) {
    let entered_before = qnn::sim_probe::execute_count(lib).unwrap();
    let started = Instant::now();
    let executor = {
        let graph = Arc::clone(graph);
        thread::spawn(move || run_add(&graph, 1, 2))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while qnn::sim_probe::execute_count(lib).unwrap() == entered_before {
        assert!(
            Instant::now() < deadline,
            "the execute never reached the backend"
        );
        thread::sleep(Duration::from_millis(1));
    }
    (started, executor)
}

/// Closes (with `close`) while a 300 ms execute runs, and checks that the close waited for it,
/// that the execute completed, and that later executes report `Closed`.
fn assert_close_waits(close: impl FnOnce(&Arc<Context>, &Arc<Graph>)) {
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &slow_add_model(&["g"], 300));
    let (started, executor) = start_slow_execute(&lib, &graph);
    close(&context, &graph);
    // The backend sleeps 300 ms inside graphExecute, so a close that waited cannot return
    // sooner than that after the execute started.
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "close did not wait"
    );
    assert_eq!(
        executor.join().unwrap().unwrap(),
        [3; 4],
        "the running execute completes"
    );
    assert_eq!(run_add(&graph, 1, 2).unwrap_err().reason(), "closed");
    drop((graph, context, runtime));
    assert_all_freed(&lib);
}

#[test]
fn closing_a_context_waits_for_a_running_execute() {
    assert_close_waits(|context, _| context.close().unwrap());
}

#[test]
fn closing_a_graph_waits_for_its_running_execute() {
    assert_close_waits(|_, graph| graph.close().unwrap());
}

#[test]
fn runtimes_share_a_library_and_stay_independent() {
    let lib = fresh_library();
    let first = Runtime::new(&config(&lib), &Site::here()).unwrap();
    let second = Runtime::new(&config(&lib), &Site::here()).unwrap();
    let (_c1, g1) = load(&first, &slow_add_model(&["g"], 0));
    first.close().unwrap();
    second.close().unwrap();
    assert_eq!(run_add(&g1, 7, 1).unwrap(), [8; 4]);
    drop((_c1, g1));
    assert_all_freed(&lib);
}
