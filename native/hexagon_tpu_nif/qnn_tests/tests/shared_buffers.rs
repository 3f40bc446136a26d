//! Shared buffers on qnn_sim, over the memfd-backed fake rpcmem: a graph's tensors in rpcmem
//! memory registered with its context (`QnnMem_register`), executed in place (qnn_sim maps
//! the registered fds and reads and writes them), pooled and reused, outputs handed out in
//! their buffers; the fallback to client buffers when rpcmem or QnnMem is missing or refuses,
//! and the registrations made again after a device reset.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use qnn::context::LoadOptions;
use qnn::io::{self, Mode, Output};
use qnn::shared::KEEP_FREE;
use qnn::{BufferChoice, BufferPath, Context, Error, Graph, Runtime, Site, counters, sim_probe};
use qnn_fake_rpcmem::{FakeRpcmemCounters, built_library};
use qnn_sim::model::{DType, Quant, TensorSpec};

/// The process-wide counters these tests compare are shared by every test of the binary: they
/// run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The fake rpcmem's own counters (`fake_rpcmem_counters`): buffers allocated and not freed.
fn rpcmem_live() -> u64 {
    // SAFETY: our own test library (the instance the runtime opened: same path, same handle).
    let lib = unsafe { libloading::Library::new(built_library()) }.expect("dlopen");
    let mut c = FakeRpcmemCounters::default();
    // SAFETY: the export takes a writable struct of exactly this layout.
    unsafe {
        let read = lib
            .get::<unsafe extern "C" fn(*mut FakeRpcmemCounters)>(b"fake_rpcmem_counters")
            .unwrap();
        read(&mut c);
    }
    assert_eq!(c.unknown_frees + c.unknown_to_fd, 0, "rpcmem misused");
    c.live
}

/// A runtime over a private qnn_sim whose rpcmem is `rpcmem`.
fn runtime_with(rpcmem: &Path) -> (PathBuf, Arc<Runtime>) {
    let lib = fresh_library();
    let config = qnn::RuntimeConfig {
        rpcmem_lib: rpcmem.to_path_buf(),
        ..config(&lib)
    };
    let runtime = Runtime::new(&config, &Site::here()).expect("runtime");
    (lib, runtime)
}

fn load(runtime: &Arc<Runtime>, model: &[u8], shared: BufferChoice) -> qnn::Result<Arc<Context>> {
    let options = LoadOptions {
        shared_buffers: shared,
        ..LoadOptions::default()
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let done = Box::new(move |result| tx.send(result).unwrap());
    Context::load_with(runtime, model.to_vec(), None, &Site::here(), options, done);
    rx.recv().unwrap()
}

fn first_graph(context: &Arc<Context>) -> Arc<Graph> {
    let name = context.graphs()[0].name.clone();
    Graph::retrieve(context, &name, &Site::here()).expect("graph")
}

/// One execute of `graph` through `io::execute`: its outputs as owned bytes.
fn run(graph: &Graph, inputs: &[&[u8]], input: Mode, output: Mode) -> Vec<Output<Vec<u8>>> {
    let outputs = graph.info().outputs.len();
    graph.with_turn(|turn| {
        io::execute(&turn, inputs, &[input], &vec![output; outputs], |n| {
            vec![0u8; n]
        })
        .map(|(outputs, _)| outputs)
        .expect("execute")
    })
}

fn bytes(outputs: &[Output<Vec<u8>>]) -> Vec<Vec<u8>> {
    outputs.iter().map(|o| o.to_vec()).collect()
}

fn sim(lib: &Path) -> sim_probe::SimCounters {
    sim_probe::counters(lib).expect("qnn_sim counters")
}

fn settle() {
    assert!(counters::settle(std::time::Duration::from_secs(10)));
}

#[test]
fn executes_in_shared_buffers_match_client_buffers_bit_for_bit() {
    let _serial = serial();
    let (lib, runtime) = runtime_with(&built_library());
    // Quantized logits (u8) and f32 probabilities.
    let logits =
        TensorSpec::new(DType::UFixed8, [1, 3]).quant(Quant::per_tensor(4.0 / 255.0, -128));
    let model = Classifier::new(logits).model();
    let shared = load(&runtime, &model, BufferChoice::On).expect("shared context");
    let client = load(&runtime, &model, BufferChoice::Off).expect("client context");
    assert_eq!(shared.buffers().unwrap(), BufferPath::Shared);
    assert_eq!(client.buffers().unwrap(), BufferPath::Client);
    let (on, off) = (first_graph(&shared), first_graph(&client));

    let features = f32_bytes(&[0.2, 0.9, 0.5, 0.1]);
    let quantized = [51u8, 230, 128, 26];
    for (input, mode) in [(&features[..], Mode::F32), (&quantized[..], Mode::Model)] {
        for output in [Mode::F32, Mode::Model] {
            let (sim_before, before) = (sim(&lib), counters::counters());
            let in_shared = run(&on, &[input], mode, output);
            let (sim_after, after) = (sim(&lib), counters::counters());
            assert_eq!(
                sim_after.mem_handle_executes,
                sim_before.mem_handle_executes + 1
            );
            assert_eq!(
                after.client_buffer_bytes_total, before.client_buffer_bytes_total,
                "no client buffer in a shared execute"
            );
            let copied = after.host_copy_bytes_total - before.host_copy_bytes_total;
            assert_eq!(copied, if mode == Mode::Model { 4 } else { 0 });

            let in_client = run(&off, &[input], mode, output);
            let client_bytes =
                counters::counters().client_buffer_bytes_total - after.client_buffer_bytes_total;
            // The u8 input, the u8 logits and the f32 probabilities.
            assert_eq!(client_bytes, 4 + 3 + 12);
            assert_eq!(sim(&lib).mem_handle_executes, sim_after.mem_handle_executes);
            assert_eq!(
                bytes(&in_shared),
                bytes(&in_client),
                "{mode:?} in, {output:?} out"
            );
            // Outputs passed on as QNN wrote them are handed out in their shared buffers; the
            // logits asked for as f32 are dequantized into a new one.
            let handed_out: Vec<bool> = in_shared
                .iter()
                .map(|o| matches!(o, Output::Shared(_)))
                .collect();
            assert_eq!(handed_out, [output == Mode::Model, true]);
        }
    }
    assert_eq!(sim(&lib).mem_stale_uses, 0);
}

#[test]
fn the_pool_reuses_its_buffers_and_nothing_leaks_over_10000_executes() {
    let _serial = serial();
    let (lib, runtime) = runtime_with(&built_library());
    settle();
    let (alive, registrations) = {
        let c = counters::counters();
        (c.shared_buffers_alive, c.shared_buffer_registrations)
    };
    let rpcmem_before = rpcmem_live();
    let context = load(
        &runtime,
        &identity_model(TensorSpec::f32([4])),
        BufferChoice::On,
    )
    .expect("context");
    let graph = first_graph(&context);
    // One buffer per tensor, allocated and registered at the load.
    assert_eq!(counters::counters().shared_buffers_alive, alive + 2);
    assert_eq!(
        counters::counters().shared_buffer_registrations,
        registrations + 2
    );

    for i in 0..10_000 {
        let values = [i as f32, 1.5, -2.0, 0.25];
        let outputs = run(&graph, &[&f32_bytes(&values)], Mode::F32, Mode::Model);
        assert_eq!(f32_values(&outputs[0]), values);
    }
    let c = counters::counters();
    assert_eq!(
        c.shared_buffers_alive,
        alive + 2,
        "the same two buffers every time"
    );
    assert_eq!(
        c.shared_buffer_registrations,
        registrations + 2,
        "registered once"
    );
    assert_eq!(sim(&lib).mem_live_registrations, 2);
    assert!(sim(&lib).mem_handle_executes >= 10_000);

    drop(graph);
    context.close().expect("close");
    drop(context);
    settle();
    assert_eq!(counters::counters().shared_buffers_alive, alive);
    assert_eq!(rpcmem_live(), rpcmem_before);
    let s = sim(&lib);
    assert_eq!((s.mem_live_registrations, s.mem_stale_uses), (0, 0));
    drop(runtime);
    assert_all_freed(&lib);
}

#[test]
fn outputs_outlive_their_graph_and_context_and_free_their_buffer_when_dropped() {
    let _serial = serial();
    let (lib, runtime) = runtime_with(&built_library());
    settle();
    let alive = counters::counters().shared_buffers_alive;
    let rpcmem_before = rpcmem_live();
    let context = load(
        &runtime,
        &identity_model(TensorSpec::f32([4])),
        BufferChoice::On,
    )
    .expect("context");
    let graph = first_graph(&context);

    // Ten outputs held at once: ten output buffers, beyond what the pool keeps.
    let held: Vec<Output<Vec<u8>>> = (0..10)
        .map(|i| {
            let values = [i as f32; 4];
            run(&graph, &[&f32_bytes(&values)], Mode::F32, Mode::Model)
                .pop()
                .unwrap()
        })
        .collect();
    assert_eq!(counters::counters().shared_buffers_alive, alive + 1 + 10);
    assert_eq!(sim(&lib).mem_live_registrations, 11);

    // Six returned: the pool keeps KEEP_FREE of them, registered, and frees the others.
    let mut held = held;
    let still_held = held.split_off(6);
    drop(held);
    let freed = 6 - KEEP_FREE as u64;
    assert_eq!(
        counters::counters().shared_buffers_alive,
        alive + 11 - freed
    );
    assert_eq!(sim(&lib).mem_live_registrations, 11 - freed);
    for (i, output) in still_held.iter().enumerate() {
        assert_eq!(f32_values(output), [(i + 6) as f32; 4]);
    }
    drop(still_held);

    // One more held past the context's close: still readable, freed when dropped.
    let values = [7.0f32, 8.0, 9.0, 10.0];
    let output = run(&graph, &[&f32_bytes(&values)], Mode::F32, Mode::Model)
        .pop()
        .unwrap();
    drop(graph);
    context.close().expect("close");
    drop(context);
    settle();
    assert_eq!(
        sim(&lib).mem_live_registrations,
        0,
        "deregistered at the close"
    );
    assert_eq!(
        counters::counters().shared_buffers_alive,
        alive + 1,
        "the held output's"
    );
    assert_eq!(f32_values(&output), values);
    drop(output);
    assert_eq!(counters::counters().shared_buffers_alive, alive);
    assert_eq!(rpcmem_live(), rpcmem_before);
    drop(runtime);
    assert_all_freed(&lib);
}

#[test]
fn without_rpcmem_or_qnnmem_the_context_falls_back_to_client_buffers() {
    let _serial = serial();
    let model = identity_model(TensorSpec::f32([4]));
    let values = [1.0f32, 2.0, 3.0, 4.0];

    // No rpcmem library.
    let (_lib, runtime) = runtime_with(Path::new("/nonexistent/libcdsprpc.so"));
    let before = counters::counters().shared_buffer_fallbacks;
    let context = load(&runtime, &model, BufferChoice::Auto).expect("context");
    let BufferPath::Fallback(why) = context.buffers().unwrap() else {
        panic!("expected a fallback, got {:?}", context.buffers());
    };
    assert!(
        why.contains("/nonexistent/libcdsprpc.so could not be opened"),
        "{why}"
    );
    assert_eq!(counters::counters().shared_buffer_fallbacks, before + 1);
    let outputs = run(
        &first_graph(&context),
        &[&f32_bytes(&values)],
        Mode::F32,
        Mode::F32,
    );
    assert_eq!(f32_values(&outputs[0]), values);
    match load(&runtime, &model, BufferChoice::On) {
        Err(Error::SharedBuffersUnavailable { why }) => {
            assert!(why.contains("could not be opened"), "{why}")
        }
        other => panic!("expected SharedBuffersUnavailable, got {other:?}"),
    }
    assert_eq!(
        load(&runtime, &model, BufferChoice::Off)
            .unwrap()
            .buffers()
            .unwrap(),
        BufferPath::Client
    );

    // QnnMem_register refused, as Qualcomm's x86 emulator refuses it.
    let (lib, runtime) = runtime_with(&built_library());
    settle();
    let (alive, rpcmem_before) = (counters::counters().shared_buffers_alive, rpcmem_live());
    sim_probe::configure(&lib, "mem_register_unsupported", "true").unwrap();
    let context = load(&runtime, &model, BufferChoice::Auto).expect("context");
    let BufferPath::Fallback(why) = context.buffers().unwrap() else {
        panic!("expected a fallback, got {:?}", context.buffers());
    };
    assert!(why.contains("memRegister") && why.contains("1000"), "{why}");
    let outputs = run(
        &first_graph(&context),
        &[&f32_bytes(&values)],
        Mode::F32,
        Mode::F32,
    );
    assert_eq!(f32_values(&outputs[0]), values);
    assert!(matches!(
        load(&runtime, &model, BufferChoice::On),
        Err(Error::SharedBuffersUnavailable { .. })
    ));
    sim_probe::configure(&lib, "mem_register_unsupported", "false").unwrap();
    assert!(sim(&lib).mem_register_refusals >= 2);
    // The buffers allocated for the attempt were freed.
    assert_eq!(counters::counters().shared_buffers_alive, alive);
    assert_eq!(rpcmem_live(), rpcmem_before);
}

#[test]
fn after_a_device_reset_the_buffers_are_registered_again_in_the_new_context() {
    let _serial = serial();
    let (lib, runtime) = runtime_with(&built_library());
    let context = load(
        &runtime,
        &identity_model(TensorSpec::f32([4])),
        BufferChoice::On,
    )
    .expect("context");
    let graph = first_graph(&context);
    let registrations = counters::counters().shared_buffer_registrations;
    sim_probe::configure(&lib, "ssr_after_executes", "1").unwrap();
    for i in 0..3 {
        let values = [i as f32, 0.5, 0.25, -1.0];
        let outputs = run(&graph, &[&f32_bytes(&values)], Mode::F32, Mode::Model);
        assert_eq!(f32_values(&outputs[0]), values, "execute {i}");
    }
    let c = counters::counters();
    assert!(c.context_recoveries >= 1);
    assert_eq!(
        c.shared_buffer_registrations,
        registrations + 2,
        "registered again, once"
    );
    let s = sim(&lib);
    assert_eq!((s.ssr_restarts, s.mem_stale_uses), (1, 0));
    assert_eq!(s.mem_live_registrations, 2);
    drop(graph);
    context.close().expect("close");
    settle();
    assert_eq!(sim(&lib).mem_live_registrations, 0);
}

#[test]
fn executes_in_the_backends_queue_use_shared_buffers_too() {
    let _serial = serial();
    let (lib, runtime) = runtime_with(&built_library());
    let options = LoadOptions {
        async_queue_depth: Some(4),
        shared_buffers: BufferChoice::On,
        ..LoadOptions::default()
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let model = identity_model(TensorSpec::f32([4]));
    Context::load_with(
        &runtime,
        model,
        None,
        &Site::here(),
        options,
        Box::new(move |r| tx.send(r).unwrap()),
    );
    let context = rx.recv().unwrap().expect("context");
    assert!(matches!(
        context.execute_queue().unwrap(),
        qnn::ExecuteQueue::Backend { .. }
    ));
    let graph = first_graph(&context);
    let before = sim(&lib).mem_handle_executes;
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..20 {
        let input = f32_bytes(&[i as f32; 4]);
        let execution = io::prepare(&graph, &[&input], &[Mode::F32], &[Mode::Model], |n| {
            vec![0u8; n]
        })
        .expect("prepared");
        let tx = tx.clone();
        graph.with_turn(|turn| {
            let info = turn.graph().info().clone();
            execution.run_on_backend(&turn, move |execution, result| {
                let outputs = result.and_then(|_| execution.finish(&info, |n| vec![0u8; n]));
                let _ = tx.send((i, outputs.map(|o| o[0].to_vec())));
            })
        });
    }
    drop(tx);
    let answers: Vec<(usize, qnn::Result<Vec<u8>>)> = rx.iter().collect();
    assert_eq!(answers.len(), 20);
    for (order, (i, outputs)) in answers.into_iter().enumerate() {
        assert_eq!(i, order, "notified in submission order");
        assert_eq!(f32_values(&outputs.expect("execute")), [i as f32; 4]);
    }
    assert_eq!(sim(&lib).mem_handle_executes, before + 20);
    assert_eq!(sim(&lib).mem_stale_uses, 0);
}
