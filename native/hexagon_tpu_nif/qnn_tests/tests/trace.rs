//! The trace's ring and its cost when off. The trace is process-wide, so this file is its own
//! test binary with a single test; it counts this thread's allocations (`qnn::counting_alloc`).

mod common;

use std::time::Instant;

use common::*;
use qnn::counting_alloc::{CountingAllocator, allocations};
use qnn::io::{self, Mode};
use qnn::trace::{self, Phase};
use qnn_sim::model::{DType, Quant, TensorSpec};

#[global_allocator]
static COUNTING: CountingAllocator = CountingAllocator;

fn names(recording: &trace::Recording) -> Vec<(&'static str, &str)> {
    recording
        .events
        .iter()
        .map(|e| (e.phase.label(), &*e.name))
        .collect()
}

#[test]
fn the_ring_keeps_the_newest_events_counts_the_rest_and_costs_nothing_when_off() {
    // Off (the default): a span is one load, no clock, no allocation, nothing recorded.
    assert!(!trace::is_on());
    let before = allocations();
    let at = Instant::now();
    for _ in 0..1000 {
        let span = trace::span(Phase::Quantize, "graph");
        drop(span);
        let lazy = trace::span_lazy(Phase::ContextLoad, || unreachable!("named while off"));
        drop(lazy);
        trace::record(Phase::Op, "conv", at, 0, 1);
    }
    assert_eq!(allocations() - before, 0);
    assert_eq!(trace::stats().emitted, 0);

    assert!(trace::start(0).is_err());
    assert!(trace::start(trace::MAX_CAPACITY + 1).is_err());

    // A ring of 4: ten spans emitted, the oldest six overwritten, the newest four kept in order.
    trace::start(4).unwrap();
    for i in 0..10 {
        let _span = trace::span(Phase::Execute, &format!("g{i}"));
    }
    let s = trace::stats();
    assert_eq!(
        (s.recording, s.capacity, s.emitted, s.dropped, s.held),
        (true, 4, 10, 6, 4)
    );
    let recording = trace::recording();
    assert_eq!(
        names(&recording),
        [
            ("execute", "g6"),
            ("execute", "g7"),
            ("execute", "g8"),
            ("execute", "g9")
        ]
    );
    // Stopped: spans record nothing; the recording stays; a span open across the stop is lost.
    let open = trace::span(Phase::Execute, "open");
    trace::stop();
    drop(open);
    drop(trace::span(Phase::Execute, "after"));
    assert_eq!(trace::stats().emitted, 10);
    assert_eq!(trace::recording().events.len(), 4);

    // A load and three executes on qnn_sim: the phases of each, nested on their threads.
    trace::start(1024).unwrap();
    let (lib, runtime) = runtime();
    let spec = TensorSpec::new(DType::UFixed8, [4]).quant(Quant::per_tensor(0.05, -128));
    let (context, graph) = load(&runtime, &identity_model(spec));
    for _ in 0..3 {
        let input = f32_bytes(&[0.1, 0.2, 0.3, 0.4]);
        graph
            .with_turn(|turn| {
                io::execute(&turn, &[&input], &[Mode::F32], &[Mode::F32], |n| vec![0; n])
            })
            .unwrap();
    }
    // A profile's ops are laid inside graphExecute through the hook.
    let op_start = Instant::now();
    trace::record(Phase::Op, "conv_1", op_start, 1_000, 2_000);
    drop(graph);
    context.close().unwrap();
    runtime.close().unwrap();
    drop(context);
    drop(runtime);
    assert_all_freed(&lib);
    trace::stop();

    let recording = trace::recording();
    assert_eq!(recording.stats.dropped, 0);
    // On each thread, in the order the phases ended (the two threads run concurrently, so only
    // each one's order is fixed): the caller's creation, load (from memory: no read), retrieve,
    // three executes and the profiled op; the runtime thread's handles, context and frees.
    let on = |tid: u64| -> Vec<&str> {
        recording
            .events
            .iter()
            .filter(|e| e.tid == tid)
            .map(|e| e.phase.label())
            .collect()
    };
    let tid_of = |phase: Phase| {
        recording
            .events
            .iter()
            .find(|e| e.phase == phase)
            .map(|e| e.tid)
            .unwrap()
    };
    let (caller, owner) = (tid_of(Phase::RuntimeCreate), tid_of(Phase::RuntimeHandles));
    assert_ne!(caller, owner);
    let mut expected = vec![
        "runtime.create",
        "QnnSystemContext_getMetadata",
        "context.load",
        "QnnGraph_retrieve",
    ];
    for _ in 0..3 {
        expected.extend([
            "execute.quantize",
            "QnnGraph_execute",
            "execute.dequantize",
            "execute",
        ]);
    }
    expected.push("op");
    assert_eq!(on(caller), expected, "{recording:?}");
    assert_eq!(
        on(owner),
        [
            "QnnLog_create",
            "QnnBackend_create",
            "QnnDevice_create",
            "runtime.handles",
            "QnnContext_createFromBinary",
            "QnnContext_free",
            "runtime.free"
        ],
        "{recording:?}"
    );
    assert_eq!(recording.events.len(), expected.len() + 7);
    let thread_names: Vec<&str> = recording.threads.iter().map(|(_, n)| &**n).collect();
    assert!(
        thread_names.iter().any(|n| n.starts_with("qnn-runtime #")),
        "{thread_names:?}"
    );

    // Each execute's children lie within it, on its thread.
    for e in recording
        .events
        .iter()
        .filter(|e| e.phase == Phase::Execute)
    {
        let children: Vec<_> = recording
            .events
            .iter()
            .filter(|c| {
                c.tid == e.tid
                    && c.phase != Phase::Execute
                    && c.start_ns >= e.start_ns
                    && c.start_ns + c.duration_ns <= e.start_ns + e.duration_ns
            })
            .map(|c| c.phase)
            .collect();
        assert_eq!(
            children,
            [Phase::Quantize, Phase::GraphExecute, Phase::Dequantize]
        );
    }
}
