//! The execute paths that do not run on the caller's thread, on qnn_sim: `Graph::execute_or_queue`
//! (run now on an idle graph, queue behind a busy one, refuse beyond the limit, queue even an
//! idle graph's with `always_queue`) and the backend's asynchronous queue
//! (`io::Execution::run_on_backend`: notifications in submission order, the context kept until
//! the last notification even when closed and dropped meanwhile, a caller gone that breaks
//! nothing).

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use qnn::context::LoadOptions;
use qnn::io::{self, Mode};
use qnn::{Context, Error, ExecuteQueue, Graph, QueuePolicy, Runtime, Site, Started};
use qnn_sim::model::TensorSpec;

const WAIT: Duration = Duration::from_secs(20);

/// An f32 identity graph over 4 values that sleeps `sleep_ms` in every execute.
fn identity(sleep_ms: u32) -> Vec<u8> {
    identity_model_sleeping(TensorSpec::f32([4]), sleep_ms)
}

fn policy(max_waiting: usize, always_queue: bool) -> QueuePolicy {
    QueuePolicy {
        max_waiting,
        always_queue,
    }
}

fn input(i: usize) -> Vec<u8> {
    let base = i as f32;
    f32_bytes(&[base, base + 0.25, base + 0.5, base + 0.75])
}

type Execution = io::Execution<Vec<u8>>;

fn prepare(graph: &Graph, bytes: &[u8]) -> Execution {
    io::prepare(graph, &[bytes], &[Mode::Model], &[Mode::Model], |n| {
        vec![0u8; n]
    })
    .expect("prepared")
}

/// Runs `execution` on the graph's turn and sends `(index, outputs)`.
fn run_and_send(
    graph: &Arc<Graph>,
    index: usize,
    bytes: Vec<u8>,
    tx: mpsc::Sender<(usize, Vec<u8>)>,
) -> Box<dyn FnOnce(qnn::Turn<'_>) + Send> {
    let mut execution = prepare(graph, &bytes);
    let graph = Arc::clone(graph);
    Box::new(move |turn| {
        execution.run(&turn, &[&bytes], None).expect("executed");
        let outputs = execution.finish(graph.info(), |n| vec![0u8; n]).unwrap();
        let _ = tx.send((index, outputs.into_iter().next().unwrap().to_vec()));
    })
}

#[test]
fn an_idle_graph_runs_the_work_here_and_a_busy_one_queues_it_in_order() {
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &identity(0));
    let (tx, rx) = mpsc::channel();
    let here = std::thread::current().id();

    // Idle: `now` runs on this thread, with the turn; while it holds it, every other
    // submission queues, and the graph's worker runs them in order after it.
    let started = graph
        .execute_or_queue(
            |turn| {
                assert_eq!(std::thread::current().id(), here);
                for i in 1..=5 {
                    let queued = graph.execute_or_queue(
                        |_| unreachable!("the turn is held"),
                        || run_and_send(&graph, i, input(i), tx.clone()),
                        policy(64, false),
                    );
                    assert_eq!(queued.unwrap(), Started::Queued);
                }
                let mut execution = prepare(&graph, &input(0));
                execution.run(&turn, &[&input(0)], None).unwrap();
                "ran here"
            },
            || unreachable!("the graph is idle"),
            policy(64, false),
        )
        .unwrap();
    assert_eq!(started, Started::Ran("ran here"));

    for i in 1..=5 {
        let (index, outputs) = rx.recv_timeout(WAIT).expect("queued work ran");
        assert_eq!(index, i, "queued work runs in submission order");
        assert_eq!(outputs, input(i));
    }
    drop((graph, context, runtime));
    freed(&lib);
}

#[test]
fn beyond_its_limit_work_is_refused_and_always_queue_queues_an_idle_graphs() {
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &identity(0));
    let (tx, rx) = mpsc::channel();
    let overloaded = qnn::counters().executes_overloaded;

    graph
        .execute_or_queue(
            |_turn| {
                for i in 0..2 {
                    let queued = graph.execute_or_queue(
                        |_| unreachable!(),
                        || run_and_send(&graph, i, input(i), tx.clone()),
                        policy(2, false),
                    );
                    assert_eq!(queued.unwrap(), Started::Queued);
                }
                // Two waiting, the limit: refused, and `later` is never asked for its work.
                let refused = graph.execute_or_queue(
                    |_| unreachable!(),
                    || -> Box<dyn FnOnce(qnn::Turn<'_>) + Send> { unreachable!("refused") },
                    policy(2, false),
                );
                match refused {
                    Err(Error::Overloaded {
                        graph: name,
                        waiting,
                        limit,
                    }) => {
                        assert_eq!((name.as_str(), waiting, limit), ("identity", 2, 2));
                    }
                    other => panic!("expected Overloaded, got {other:?}"),
                }
            },
            || unreachable!(),
            policy(2, false),
        )
        .unwrap();
    assert_eq!(qnn::counters().executes_overloaded - overloaded, 1);
    for i in 0..2 {
        assert_eq!(rx.recv_timeout(WAIT).unwrap().0, i);
    }

    graph.with_turn(|_| ()); // idle again
    // Idle, but always_queue: the worker runs it, not this thread (and the limit does not
    // apply: it waits for nobody).
    let here = std::thread::current().id();
    let (ran_on, on) = mpsc::channel();
    let started = graph.execute_or_queue(
        |_| unreachable!("always_queue"),
        || {
            Box::new(move |_turn| {
                let _ = ran_on.send(std::thread::current().id());
            })
        },
        policy(0, true),
    );
    assert_eq!(started.unwrap(), Started::Queued);
    assert_ne!(on.recv_timeout(WAIT).unwrap(), here);
    drop((graph, context, runtime));
    freed(&lib);
}

/// A runtime and a context whose executes go to qnn_sim's asynchronous queue.
fn backend_context(model: &[u8]) -> (std::path::PathBuf, Arc<Runtime>, Arc<Context>) {
    let (lib, runtime) = runtime();
    let options = LoadOptions {
        async_queue_depth: Some(4),
        ..LoadOptions::default()
    };
    let (tx, rx) = mpsc::channel();
    Context::load_with(
        &runtime,
        model.to_vec(),
        None,
        &Site::here(),
        options,
        Box::new(move |context| {
            let _ = tx.send(context);
        }),
    );
    let context = rx.recv_timeout(WAIT).unwrap().expect("context");
    assert_eq!(
        context.execute_queue().unwrap(),
        ExecuteQueue::Backend { depth: 4 }
    );
    (lib, runtime, context)
}

type Answers = mpsc::Receiver<(usize, qnn::Result<Vec<u8>>)>;

/// Submits `count` executes to the backend's queue, in order, from the graph's worker (as the
/// NIF does); each answers `(index, outputs)` when notified, except `gone`, whose caller has
/// gone: its answer is dropped.
fn submit(graph: &Arc<Graph>, count: usize, gone: Option<usize>) -> Answers {
    let (tx, rx) = mpsc::channel();
    for i in 0..count {
        let bytes = input(i);
        let mut execution = prepare(graph, &bytes);
        execution.own_inputs(&[&bytes]);
        let tx = tx.clone();
        let info = graph.info().clone();
        let started = graph.execute_or_queue(
            |_| unreachable!("always_queue"),
            move || {
                Box::new(move |turn| {
                    execution.run_on_backend(&turn, move |execution, result| {
                        if gone == Some(i) {
                            return;
                        }
                        let outputs = result.and_then(|_| {
                            let outputs = execution.finish(&info, |n| vec![0u8; n])?;
                            Ok(outputs.into_iter().next().unwrap().to_vec())
                        });
                        let _ = tx.send((i, outputs));
                    })
                })
            },
            policy(64, true),
        );
        assert_eq!(started.unwrap(), Started::Queued);
    }
    rx
}

#[test]
fn backend_notifications_answer_in_submission_order() {
    let (lib, runtime, context) = backend_context(&identity(2));
    let graph = Graph::retrieve(&context, "identity", &Site::here()).unwrap();
    let executes = qnn::counters().executes;

    let answers = submit(&graph, 8, None);
    for i in 0..8 {
        let (index, outputs) = answers.recv_timeout(WAIT).expect("notified");
        assert_eq!(index, i, "notified in submission order");
        assert_eq!(outputs.unwrap(), input(i));
    }
    assert!(qnn::counters().executes - executes >= 8);
    drop((graph, context, runtime));
    freed(&lib);
}

#[test]
fn the_context_lives_until_its_last_notification_though_closed_and_dropped() {
    let (lib, runtime, context) = backend_context(&identity(20));
    let graph = Graph::retrieve(&context, "identity", &Site::here()).unwrap();
    let answers = submit(&graph, 4, None);
    // All four in the backend's queue (one running, 20 ms each): none is left on the graph's
    // worker, where a closed context refuses an execute not yet submitted.
    let submitted = || {
        qnn::sim_probe::async_in_flight(&lib).unwrap()
            + qnn::sim_probe::async_notifications(&lib).unwrap()
    };
    assert!(wait_for(|| submitted() == 4));

    // Every reference given up while the executes are in the backend's queue: the close
    // waits for nobody, and the handle is freed after the last notification.
    let closed = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&closed);
    context.close_then(Box::new(move |result| *slot.lock().unwrap() = Some(result)));
    drop((graph, context));
    assert!(live_handles(&lib) > 0, "freed under the queued executes");

    for i in 0..4 {
        let (index, outputs) = answers.recv_timeout(WAIT).expect("notified");
        assert_eq!(index, i);
        assert_eq!(outputs.expect("the context was kept for it"), input(i));
    }
    assert!(wait_for(|| closed.lock().unwrap().is_some()));
    assert!(closed.lock().unwrap().take().unwrap().is_ok());
    drop(runtime);
    freed(&lib);
}

#[test]
fn a_caller_gone_breaks_nothing_in_the_backend_queue() {
    let (lib, runtime, context) = backend_context(&identity(2));
    let graph = Graph::retrieve(&context, "identity", &Site::here()).unwrap();

    let answers = submit(&graph, 5, Some(2));
    let got: Vec<usize> = (0..4)
        .map(|_| {
            let (index, outputs) = answers.recv_timeout(WAIT).expect("notified");
            assert_eq!(outputs.unwrap(), input(index));
            index
        })
        .collect();
    assert_eq!(got, [0, 1, 3, 4]);

    // And the queue goes on taking executes.
    let answers = submit(&graph, 2, None);
    assert_eq!(answers.recv_timeout(WAIT).unwrap().0, 0);
    assert_eq!(answers.recv_timeout(WAIT).unwrap().0, 1);
    drop((graph, context, runtime));
    freed(&lib);
    assert_eq!(qnn::sim_probe::async_in_flight(&lib).unwrap(), 0);
}

/// Every handle of `lib` freed, once the worker threads have dropped what they held (a queued
/// execute's answer is sent before its work returns).
fn freed(lib: &std::path::Path) {
    assert!(
        wait_for(|| live_handles(lib) == 0),
        "qnn_sim still has live handles"
    );
}

fn wait_for(done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn a_reset_in_the_backend_queue_answers_its_executes_and_the_next_run_on_the_context_recovered() {
    let (lib, runtime, context) = backend_context(&identity(0));
    let graph = Graph::retrieve(&context, "identity", &Site::here()).unwrap();
    let before = qnn::counters();
    // Three executes in the backend's queue when the DSP restarts under the first.
    qnn::sim_probe::configure(&lib, "async_paused", "1").unwrap();
    let answers = submit(&graph, 3, None);
    while qnn::sim_probe::async_in_flight(&lib).unwrap() < 3 {
        std::thread::yield_now();
    }
    qnn::sim_probe::configure(&lib, "ssr_after_executes", "0").unwrap();
    qnn::sim_probe::configure(&lib, "async_paused", "0").unwrap();
    for i in 0..3 {
        let (index, outputs) = answers.recv_timeout(WAIT).expect("notified");
        assert_eq!(index, i);
        match outputs {
            Err(Error::DeviceReset { graph, detail, .. }) => {
                assert_eq!(graph, "identity");
                assert!(detail.contains("not retried"), "{detail}");
            }
            other => panic!("execute {i}: expected a device reset, got {other:?}"),
        }
    }
    // QNN had those buffers, so they were answered; the executes after them wait for the
    // recovery the first notification started, then run on the new context.
    let answers = submit(&graph, 2, None);
    for i in 0..2 {
        let (index, outputs) = answers.recv_timeout(WAIT).expect("notified");
        assert_eq!((index, outputs.unwrap()), (i, input(i)));
    }
    let after = qnn::counters();
    assert_eq!(after.device_resets - before.device_resets, 3);
    assert_eq!(after.context_recoveries - before.context_recoveries, 1);
    assert_eq!(qnn::sim_probe::ssr_dead_contexts(&lib).unwrap(), 0);
    drop((graph, context, runtime));
    freed(&lib);
}
