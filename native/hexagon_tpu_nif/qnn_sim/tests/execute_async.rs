//! `QnnGraph_executeAsync` through a fresh library copy: FIFO notifications on the context's own
//! worker thread, several executes in flight, the queue depth from the context config (its
//! limits, blocking when full), pending executes answered when the context is freed, errors at
//! call time, and nothing left alive afterwards. Ordering-based: the `async_paused` knob holds
//! the worker, so no test depends on how long anything takes.

mod common;
mod models;

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::*;
use models::*;
use qnn_sys::*;

/// One notification, as the callback saw it.
#[derive(Clone, Debug)]
struct Note {
    tag: usize,
    code: u32,
    /// The OS thread (the library's own Rust `std` names its threads, not ours).
    thread: libc::pid_t,
    thread_name: String,
}

/// The calling OS thread's id and name.
fn os_thread() -> (libc::pid_t, String) {
    let mut name = [0u8; 64];
    // SAFETY: the buffer is writable for its length; glibc NUL-terminates the name in it.
    let rc = unsafe {
        libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), name.len())
    };
    assert_eq!(rc, 0);
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    (tid, String::from_utf8_lossy(&name[..end]).into_owned())
}

#[derive(Default)]
struct Recorder {
    notes: Mutex<Vec<Note>>,
    changed: Condvar,
}

impl Recorder {
    /// Waits (at most 10 s, a hang guard, not a timing assumption) for `n` notifications.
    fn wait_for(&self, n: usize) -> Vec<Note> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut notes = self.notes.lock().unwrap();
        while notes.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{} of {n} notifications", notes.len());
            notes = self.changed.wait_timeout(notes, left).unwrap().0;
        }
        notes.clone()
    }

    fn now(&self) -> Vec<Note> {
        self.notes.lock().unwrap().clone()
    }
}

/// What a notify parameter points to: the recorder and which execute this was.
struct Slot {
    recorder: Arc<Recorder>,
    tag: usize,
}

unsafe extern "C" fn record(param: *mut c_void, status: Qnn_NotifyStatus_t) {
    // SAFETY: every execute below passes a pointer to a `Slot` that outlives its notification.
    let slot = unsafe { &*(param as *const Slot) };
    let (thread, thread_name) = os_thread();
    let mut notes = slot.recorder.notes.lock().unwrap();
    notes.push(Note {
        tag: slot.tag,
        code: error_code(status.error),
        thread,
        thread_name,
    });
    slot.recorder.changed.notify_all();
}

/// One asynchronous execute's tensors and buffers, alive until it is answered.
struct Run {
    ins: Vec<Qnn_Tensor_t>,
    outs: Vec<Qnn_Tensor_t>,
    _inputs: Vec<Vec<u8>>,
    out_bufs: Vec<Vec<u8>>,
    slot: Box<Slot>,
}

// SAFETY: the tensors' pointers are into this struct's own buffers or the System context's
// metadata, alive while the test uses them.
unsafe impl Send for Run {}

/// The graph's tensors (from the library's own metadata) over copies of `inputs`.
///
/// # Safety
/// `info` must be a live metadata answer of the library.
unsafe fn run_for(
    info: *const QnnSystemContext_BinaryInfo_t,
    name: &str,
    inputs: &[&[u8]],
    recorder: &Arc<Recorder>,
    tag: usize,
) -> Box<Run> {
    // SAFETY: per the contract; the tensor structs are copied, their name/dims pointers stay
    // valid while the System context lives.
    unsafe {
        let m = read_binary_meta(info, 88);
        let gi = m
            .graphs
            .iter()
            .position(|g| g.name.as_deref() == Some(name))
            .expect("graph");
        let g = &*(*info).info.contextBinaryInfoV3.graphs.add(gi);
        let v = g.info.graphInfoV1;
        let mut run = Box::new(Run {
            ins: (0..v.numGraphInputs as usize)
                .map(|i| *v.graphInputs.add(i))
                .collect(),
            outs: (0..v.numGraphOutputs as usize)
                .map(|i| *v.graphOutputs.add(i))
                .collect(),
            _inputs: inputs.iter().map(|i| i.to_vec()).collect(),
            out_bufs: m.graphs[gi]
                .outputs
                .iter()
                .map(|t| vec![0u8; byte_size(t)])
                .collect(),
            slot: Box::new(Slot {
                recorder: Arc::clone(recorder),
                tag,
            }),
        });
        let run_ref = &mut *run;
        for (t, data) in run_ref.ins.iter_mut().zip(&run_ref._inputs) {
            t.tensor.v1.memType = QNN_TENSORMEMTYPE_RAW;
            t.tensor.v1.memory.clientBuf = Qnn_ClientBuffer_t {
                data: data.as_ptr() as *mut c_void,
                dataSize: data.len() as u32,
            };
        }
        for (t, buf) in run_ref.outs.iter_mut().zip(run_ref.out_bufs.iter_mut()) {
            t.tensor.v1.memType = QNN_TENSORMEMTYPE_RAW;
            t.tensor.v1.memory.clientBuf = Qnn_ClientBuffer_t {
                data: buf.as_mut_ptr().cast(),
                dataSize: buf.len() as u32,
            };
        }
        run
    }
}

/// Calls `graphExecuteAsync` for `run`; the status code of the call.
fn execute_async(sim: &Sim, graph: *mut c_void, run: &mut Run) -> u32 {
    let f = sim.core().graphExecuteAsync.expect("graphExecuteAsync");
    // SAFETY: the tensors and buffers live in `run`, kept until the notification; the notify
    // parameter is `run.slot`, likewise.
    code(unsafe {
        f(
            graph,
            run.ins.as_ptr(),
            run.ins.len() as u32,
            run.outs.as_mut_ptr(),
            run.outs.len() as u32,
            ptr::null_mut(),
            ptr::null_mut(),
            Some(record),
            (&raw const *run.slot).cast_mut().cast(),
        )
    })
}

/// The classifier's input number `k`.
fn input(k: usize) -> [u8; 4] {
    let k = k as u8;
    [
        k.wrapping_mul(37),
        255 - k,
        k.wrapping_mul(3),
        128u8.wrapping_add(k),
    ]
}

struct Fixture {
    sim: Sim,
    session: Session,
    bytes: Vec<u8>,
    ctx: *mut c_void,
    graph: *mut c_void,
    /// The System context whose metadata the tensors point into.
    system: *mut c_void,
    info: *const QnnSystemContext_BinaryInfo_t,
}

impl Fixture {
    fn new(config: &[QnnContext_Config_t]) -> Fixture {
        let sim = Sim::load();
        let session = sim.open();
        let bytes = classifier().build().unwrap();
        let ctx = sim.create_context_with(&session, &bytes, config).unwrap();
        let graph = sim.retrieve(ctx, "classifier").unwrap();
        let (system, info) = sim.metadata_raw(&bytes).unwrap();
        Fixture {
            sim,
            session,
            bytes,
            ctx,
            graph,
            system,
            info,
        }
    }

    fn run(&self, recorder: &Arc<Recorder>, tag: usize) -> Box<Run> {
        // SAFETY: the metadata answer lives until `finish`.
        unsafe { run_for(self.info, "classifier", &[&input(tag)], recorder, tag) }
    }

    /// Frees everything and checks that nothing of the library is left alive.
    fn finish(self, ctx_freed: bool) {
        if !ctx_freed {
            assert_eq!(self.sim.free_context(self.ctx), 0);
        }
        assert_eq!(self.sim.free_system(self.system), 0);
        self.sim.close(self.session);
        assert_eq!(self.sim.live(), 0, "handles or worker threads left alive");
        assert_eq!(self.sim.async_in_flight(), 0);
    }
}

#[test]
fn fifo_notifications_on_the_contexts_own_thread_with_graph_executes_numerics() {
    let f = Fixture::new(&[]);
    let recorder = Arc::new(Recorder::default());
    assert_eq!(f.sim.configure("async_delay_ms", "1"), 0);
    let n = 24;
    let mut runs: Vec<Box<Run>> = (0..n).map(|k| f.run(&recorder, k)).collect();
    for run in &mut runs {
        assert_eq!(execute_async(&f.sim, f.graph, run), 0);
    }
    let notes = recorder.wait_for(n);
    let tags: Vec<usize> = notes.iter().map(|n| n.tag).collect();
    assert_eq!(tags, (0..n).collect::<Vec<_>>(), "FIFO");
    assert!(notes.iter().all(|n| n.code == 0), "{notes:?}");
    let me = os_thread().0;
    assert!(notes.iter().all(|n| n.thread != me));
    assert!(
        notes.iter().all(|n| n.thread == notes[0].thread),
        "one worker"
    );
    assert_eq!(notes[0].thread_name, "qnn_sim-async");
    for (k, run) in runs.iter().enumerate() {
        let sync = f
            .sim
            .execute(&f.bytes, f.graph, "classifier", &[&input(k)])
            .unwrap();
        assert_eq!(
            run.out_bufs, sync,
            "execute {k}: async and sync outputs differ"
        );
    }
    assert_eq!(f.sim.async_notifications(), n as u64);
    assert_eq!(f.sim.overlaps(), 0);
    assert_eq!(f.sim.executes(), 2 * n as u64);
    // The worker lives until the context is freed, and counts as a live handle until then.
    assert_eq!(
        f.sim.live(),
        3 + 1 + 1 + 1,
        "session, context, System context, worker"
    );
    f.finish(false);
}

#[test]
fn several_executes_in_flight_at_once() {
    let f = Fixture::new(&[]);
    let recorder = Arc::new(Recorder::default());
    assert_eq!(f.sim.configure("async_paused", "1"), 0);
    let mut runs: Vec<Box<Run>> = (0..5).map(|k| f.run(&recorder, k)).collect();
    for run in &mut runs {
        // Within the default depth (8): each call returns at once, though none has run.
        assert_eq!(execute_async(&f.sim, f.graph, run), 0);
    }
    assert_eq!(f.sim.async_in_flight(), 5);
    assert!(recorder.now().is_empty(), "nothing runs while paused");
    assert_eq!(f.sim.configure("async_paused", "0"), 0);
    let notes = recorder.wait_for(5);
    assert_eq!(
        notes.iter().map(|n| n.tag).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert_eq!(f.sim.peak_async_in_flight(), 5);
    f.finish(false);
}

#[test]
fn a_full_queue_blocks_the_caller_until_a_slot_frees() {
    let f = Fixture::new(&[QnnContext_Config_t::async_execution_queue_depth(2)]);
    let recorder = Arc::new(Recorder::default());
    assert_eq!(f.sim.configure("async_paused", "1"), 0);
    let mut runs: Vec<Box<Run>> = (0..2).map(|k| f.run(&recorder, k)).collect();
    for run in &mut runs {
        assert_eq!(execute_async(&f.sim, f.graph, run), 0);
    }
    let returned = AtomicBool::new(false);
    let mut third = f.run(&recorder, 2);
    let graph = f.graph as usize;
    std::thread::scope(|scope| {
        let third_call = scope.spawn(|| {
            let rc = execute_async(&f.sim, graph as *mut c_void, &mut third);
            returned.store(true, Ordering::SeqCst);
            rc
        });
        // However long we wait, the third call cannot return while two are in flight.
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !returned.load(Ordering::SeqCst),
            "the third call did not block"
        );
        assert_eq!(f.sim.async_in_flight(), 2);
        assert_eq!(f.sim.configure("async_paused", "0"), 0);
        assert_eq!(third_call.join().unwrap(), 0);
    });
    let notes = recorder.wait_for(3);
    assert_eq!(notes.iter().map(|n| n.tag).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(f.sim.peak_async_in_flight(), 2, "never more than the depth");
    drop((runs, third));

    // With `async_queue_full=refuse`, a full queue answers 6025 at once instead.
    assert_eq!(f.sim.configure("async_queue_full", "refuse"), 0);
    assert_eq!(f.sim.configure("async_paused", "1"), 0);
    let recorder = Arc::new(Recorder::default());
    let mut runs: Vec<Box<Run>> = (0..3).map(|k| f.run(&recorder, k)).collect();
    assert_eq!(execute_async(&f.sim, f.graph, &mut runs[0]), 0);
    assert_eq!(execute_async(&f.sim, f.graph, &mut runs[1]), 0);
    assert_eq!(
        execute_async(&f.sim, f.graph, &mut runs[2]),
        QNN_GRAPH_ERROR_EXECUTION_ASYNC_FIFO_FULL
    );
    assert_eq!(f.sim.configure("async_paused", "0"), 0);
    assert_eq!(recorder.wait_for(2).len(), 2);
    f.finish(false);
}

#[test]
fn the_queue_depth_config_is_checked_at_context_creation() {
    let sim = Sim::load();
    let s = sim.open();
    let bytes = classifier().build().unwrap();
    let depth = QnnContext_Config_t::async_execution_queue_depth;
    let mut undefined_type = depth(4);
    undefined_type.value.asyncExeQueueDepth.type_ =
        QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_UNDEFINED;
    for (config, expected) in [
        (vec![depth(1)], Ok(())),
        (vec![depth(300)], Ok(())),
        (vec![depth(0)], Err(QNN_CONTEXT_ERROR_INVALID_CONFIG)),
        (vec![depth(301)], Err(QNN_CONTEXT_ERROR_INVALID_CONFIG)),
        (vec![undefined_type], Err(QNN_CONTEXT_ERROR_INVALID_CONFIG)),
        // The last of repeated options wins, as QNN says.
        (vec![depth(301), depth(3)], Ok(())),
        (
            vec![depth(3), depth(301)],
            Err(QNN_CONTEXT_ERROR_INVALID_CONFIG),
        ),
    ] {
        match (sim.create_context_with(&s, &bytes, &config), expected) {
            (Ok(ctx), Ok(())) => assert_eq!(sim.free_context(ctx), 0),
            (Err(code), Err(want)) => assert_eq!(code, want),
            (got, want) => panic!("{got:?}, expected {want:?}"),
        }
    }
    sim.close(s);
    assert_eq!(sim.live(), 0);
}

#[test]
fn pending_executes_are_answered_6039_when_the_context_is_freed() {
    let f = Fixture::new(&[QnnContext_Config_t::async_execution_queue_depth(3)]);
    let recorder = Arc::new(Recorder::default());
    assert_eq!(f.sim.configure("async_paused", "1"), 0);
    let mut runs: Vec<Box<Run>> = (0..3).map(|k| f.run(&recorder, k)).collect();
    for run in &mut runs {
        assert_eq!(execute_async(&f.sim, f.graph, run), 0);
    }
    // A fourth caller waits for a slot of the full queue when the context goes. Its own
    // thread, not joined unless it returns: a broken free fails this test instead of hanging.
    let mut fourth = f.run(&recorder, 3);
    let graph = f.graph as usize;
    let (done, answer) = std::sync::mpsc::channel();
    let sim = f.sim.reopen();
    std::thread::spawn(move || {
        let rc = execute_async(&sim, graph as *mut c_void, &mut fourth);
        let _ = done.send((rc, fourth));
    });
    while f.sim.executes() < 4 {
        std::thread::yield_now();
    }
    assert_eq!(f.sim.free_context(f.ctx), 0);
    // By the time contextFree returned, every queued execute was answered, in order.
    let notes = recorder.now();
    assert_eq!(notes.iter().map(|n| n.tag).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(
        notes
            .iter()
            .all(|n| n.code == QNN_GRAPH_ERROR_INVALID_CONTEXT),
        "{notes:?}"
    );
    // Whether it was still waiting or not yet there, it is refused.
    let (rc, _fourth) = answer
        .recv_timeout(Duration::from_secs(10))
        .expect("the caller waiting on the full queue was not released by contextFree");
    assert!(
        rc == QNN_GRAPH_ERROR_INVALID_CONTEXT || rc == QNN_GRAPH_ERROR_INVALID_HANDLE,
        "the waiting caller: {rc}"
    );
    assert_eq!(recorder.now().len(), 3, "a refused call is not notified");
    assert_eq!(f.sim.configure("async_paused", "0"), 0);
    f.finish(true);
}

#[test]
fn failures_at_call_time_notify_nothing_and_execute_faults_reach_the_callback() {
    let sim = Sim::load();
    let s = sim.open();
    let bytes = classifier()
        .fail_execute(qnn_sim::model::Fault::once(
            QNN_COMMON_ERROR_SYSTEM_COMMUNICATION,
        ))
        .build()
        .unwrap();
    let ctx = sim.create_context(&s, &bytes).unwrap();
    let graph = sim.retrieve(ctx, "classifier").unwrap();
    let (system, info) = sim.metadata_raw(&bytes).unwrap();
    let recorder = Arc::new(Recorder::default());
    // SAFETY: the metadata answer lives until freed below.
    let run = |tag| unsafe { run_for(info, "classifier", &[&input(tag)], &recorder, tag) };

    let mut bad_handle = run(0);
    assert_eq!(
        execute_async(&sim, ctx, &mut bad_handle),
        QNN_GRAPH_ERROR_INVALID_HANDLE
    );
    let mut bad_tensor = run(1);
    // SAFETY: the metadata's tensors are v1 or v2, which share the v1 prefix written here.
    unsafe { bad_tensor.ins[0].tensor.v1.memory.clientBuf.dataSize -= 1 };
    assert_eq!(
        execute_async(&sim, graph, &mut bad_tensor),
        QNN_GRAPH_ERROR_INVALID_TENSOR
    );
    let mut first = run(2);
    let mut second = run(3);
    assert_eq!(execute_async(&sim, graph, &mut first), 0);
    assert_eq!(execute_async(&sim, graph, &mut second), 0);
    let notes = recorder.wait_for(2);
    assert_eq!(
        notes.iter().map(|n| (n.tag, n.code)).collect::<Vec<_>>(),
        [(2, QNN_COMMON_ERROR_SYSTEM_COMMUNICATION), (3, 0)],
        "the injected fault reaches the first execute's callback"
    );
    assert_eq!(sim.async_notifications(), 2);

    // A backend without the entry: NULL in the table, and the capability says so.
    let has = |sim: &Sim| {
        // SAFETY: takes a value.
        code(unsafe {
            sim.core().propertyHasCapability.unwrap()(QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION)
        })
    };
    assert_eq!(has(&sim), 0);
    assert_eq!(sim.configure("null_entries", "graphExecuteAsync"), 0);
    assert!(sim.core().graphExecuteAsync.is_none());
    assert_eq!(has(&sim), QNN_COMMON_ERROR_NOT_SUPPORTED);

    assert_eq!(sim.free_context(ctx), 0);
    assert_eq!(sim.free_system(system), 0);
    sim.close(s);
    assert_eq!(sim.live(), 0);
}
