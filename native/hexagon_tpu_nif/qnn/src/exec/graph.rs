//! `Graph`: one executable graph of a context.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::base::closable::Closable;
use crate::base::error::{Error, Result};
use crate::base::sync::{Done, lock};
use crate::exec::context::recovery::{self, Retry};
use crate::exec::context::{Context, ContextCore, ExecuteQueue, OwnedHandleUse};
use crate::exec::profile::{self, Profiler};
use crate::exec::shared::SharedPool;
pub use crate::exec::turn::QueuePolicy;
use crate::exec::turn::{Queued, Taken, TurnGuard, TurnSlot};
use crate::model::buffers;
use crate::model::metadata::{GraphInfo, GraphMetadata};
use crate::observe::counters;
use crate::observe::ledger::{Alive, Kind, Site};
use crate::observe::trace::{self, Phase};
use crate::sys;

mod places;

use places::AsyncTensors;
pub(crate) use places::{Place, Places};

/// What one execute measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecuteReport {
    /// Time spent inside `graphExecute` alone; for an execute in the backend's queue
    /// ([`ExecuteQueue::Backend`]), from its submission (`graphExecuteAsync`) to QNN's
    /// notification, so the wait behind the executes queued before it is in it.
    pub execute_ns: u64,
    /// When the device was reset under this execute and its context created again (see
    /// [`crate::context`]) before the execute was retried: how long the caller waited for
    /// that, in nanoseconds.
    pub recovery_ns: Option<u64>,
}

/// A graph's handle and the generation of its context's handle it was retrieved from.
#[derive(Clone, Copy)]
struct GraphHandle {
    generation: u64,
    raw: sys::Qnn_GraphHandle_t,
}

/// The live part of a graph: released by `close` or drop.
struct GraphState {
    context: Arc<ContextCore>,
    /// Retrieved again when its context was created again after a device reset.
    handle: Mutex<GraphHandle>,
    c_name: CString,
    /// Whether an execute has returned (QNN may build state lazily at the first).
    executed: AtomicBool,
    _alive: Alive,
}

// SAFETY: the graph handle is an opaque token that QNN allows to be used from any thread; this
// crate never runs two `graphExecute` calls on one handle at once (only the holder of the
// graph's turn executes).
unsafe impl Send for GraphState {}
// SAFETY: shared references only read the handle's value; the QNN calls made with it
// (`graphExecute`, and `graphExecuteAsync`, which only submits) run only while holding the
// graph's turn, so never two at once; the backend orders what it queued.
unsafe impl Sync for GraphState {}

/// A graph retrieved from a context, ready to execute.
pub struct Graph {
    metadata: Arc<GraphMetadata>,
    /// This graph's turn in its context, shared with every `Graph` of the same name.
    turn: Arc<TurnSlot>,
    state: Closable<GraphState>,
    profiler: Profiler,
    /// Where its queued executes run: its context's choice.
    queue: ExecuteQueue,
    /// Its shared buffers, when its context has them.
    shared: Option<Arc<SharedPool>>,
}

/// Proof that the caller holds the graph's turn: only a `Turn` can execute.
pub struct Turn<'g> {
    graph: &'g Graph,
}

/// Whether work given to [`Graph::execute_or_queue`] ran at once or was queued.
#[derive(Debug, PartialEq, Eq)]
pub enum Started<R> {
    /// It ran on the caller's thread; here is its result.
    Ran(R),
    /// The graph was busy, or the policy said `always_queue`: it runs on the graph's worker
    /// thread after the work before it.
    Queued,
}

impl Graph {
    /// Retrieves a graph by name; the error lists the names the context has. `site` is its
    /// entry in the [ledger](crate::ledger).
    pub fn retrieve(context: &Arc<Context>, name: &str, site: &Site) -> Result<Arc<Graph>> {
        let core = context.core()?;
        let queue = core.queue;
        let not_found = || Error::GraphNotFound {
            name: name.to_string(),
            available: core.graphs.iter().map(|g| g.info.name.clone()).collect(),
        };
        let (index, metadata) = core
            .graphs
            .iter()
            .enumerate()
            .find(|(_, g)| g.info.name == name)
            .map(|(index, g)| (index, Arc::clone(g)))
            .ok_or_else(not_found)?;
        // Names read from the binary never contain NUL, so a name that matched has none either.
        let c_name = CString::new(name).map_err(|_| not_found())?;
        let shared = core.shared.get(index).cloned();
        let handle = {
            let context_handle = core.try_handle()?;
            GraphHandle {
                generation: context_handle.generation,
                raw: retrieve_raw(&core, *context_handle, &c_name)?,
            }
        };
        Ok(Arc::new(Graph {
            metadata,
            turn: Arc::clone(&core.turns[index]),
            state: Closable::new(
                "graph",
                GraphState {
                    context: core,
                    handle: Mutex::new(handle),
                    c_name,
                    executed: AtomicBool::new(false),
                    _alive: Alive::new(Kind::Graph, site.as_str(), name.to_string()),
                },
            ),
            profiler: Profiler::default(),
            queue,
            shared,
        }))
    }

    /// The graph's name, inputs and outputs.
    pub fn info(&self) -> &GraphInfo {
        &self.metadata.info
    }

    /// Its pool of shared buffers, when its context executes in them.
    pub(crate) fn shared_pool(&self) -> Option<&Arc<SharedPool>> {
        self.shared.as_ref()
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.metadata.info.name
    }

    /// Where its queued executes wait and run: on its worker thread, or in the backend's
    /// asynchronous queue (then every execute is queued, and run with
    /// [`io::Execution::run_on_backend`](crate::io::Execution::run_on_backend)).
    pub fn execute_queue(&self) -> ExecuteQueue {
        self.queue
    }

    /// Runs `now` with the graph's turn if the graph is idle (and `policy` lets the caller run
    /// it). Otherwise queues `later()`: the graph's worker thread runs it with the turn once the
    /// executes before it are done; or refuses it with [`Error::Overloaded`] when `policy`'s
    /// limit of waiting executes is reached. Never blocks. The turn is given back when `now` or
    /// the queued work returns.
    pub fn execute_or_queue<R>(
        self: &Arc<Self>,
        now: impl FnOnce(Turn<'_>) -> R,
        later: impl FnOnce() -> Box<dyn FnOnce(Turn<'_>) + Send>,
        policy: QueuePolicy,
    ) -> Result<Started<R>> {
        let queued = || -> Queued {
            let graph = Arc::clone(self);
            let work = later();
            let waiting = trace::span(Phase::Wait, graph.name());
            Box::new(move || {
                waiting.end();
                work(Turn { graph: &graph })
            })
        };
        match self.turn.take_or_queue(queued, policy) {
            Taken::Now(guard) => {
                let result = now(Turn { graph: self });
                drop(guard);
                Ok(Started::Ran(result))
            }
            Taken::Queued => Ok(Started::Queued),
            Taken::Full { waiting } => {
                counters::record_overloaded();
                Err(Error::Overloaded {
                    graph: self.name().to_string(),
                    waiting,
                    limit: policy.max_waiting,
                })
            }
        }
    }

    /// Waits for the graph's turn, then runs `work` with it (for callers that own their thread).
    pub fn with_turn<R>(&self, work: impl FnOnce(Turn<'_>) -> R) -> R {
        let guard: TurnGuard = self.turn.take_blocking();
        let result = work(Turn { graph: self });
        drop(guard);
        result
    }

    /// Runs the graph once, waiting for its turn: see [`Turn::execute`].
    pub fn execute(&self, inputs: &[&[u8]], outputs: &mut [&mut [u8]]) -> Result<ExecuteReport> {
        self.with_turn(|turn| turn.execute(inputs, outputs))
    }

    /// Releases the graph once the executes running or queued before it are done; later calls
    /// report `Closed`. Never blocks: `done` gets the result (on the graph's worker thread when
    /// the graph was busy). QNN has no graph free: the handle dies with its context, which this
    /// stops holding.
    pub fn close_then(self: &Arc<Self>, done: Done<()>) {
        let mut done = Some(done);
        let queued = || -> Queued {
            let graph = Arc::clone(self);
            let done = done.take();
            Box::new(move || {
                let result = graph.take_state();
                if let Some(done) = done {
                    done(result);
                }
            })
        };
        if let Taken::Now(guard) = self.turn.take_or_queue(queued, QueuePolicy::default()) {
            let result = self.take_state();
            drop(guard);
            if let Some(done) = done.take() {
                done(result);
            }
        }
    }

    fn take_state(&self) -> Result<()> {
        self.profiler.close();
        self.state.close().map(drop)
    }

    /// Profiles one execute in `every` (`None` stops), adding each sample's per-op cycles to
    /// [`Graph::profile_table`]; see [`crate::profile`]. Creates the graph's detailed profile
    /// handle now (waiting for the runtime's thread), so that no execute waits for it later.
    pub fn set_profile_every(&self, every: Option<u32>) -> Result<()> {
        let state = self.state.get()?;
        self.profiler.sample_every(&state.context.runtime, every)
    }

    /// The per-op cycles of the executes sampled since [`Graph::set_profile_every`].
    pub fn profile_table(&self) -> profile::OpTable {
        self.profiler.table()
    }

    /// Releases the graph after the executes running or queued before it; later calls report
    /// `Closed`. Waits for them (for callers that own their thread; see [`Graph::close_then`]).
    pub fn close(&self) -> Result<()> {
        self.with_turn(|turn| turn.graph.take_state())
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.state.is_closed()
    }
}

/// `graphRetrieve` of `name` in the context handle `raw` (kept live by the caller's use).
fn retrieve_raw(
    core: &ContextCore,
    raw: sys::Qnn_ContextHandle_t,
    name: &std::ffi::CStr,
) -> Result<sys::Qnn_GraphHandle_t> {
    let _span = trace::span_lazy(Phase::GraphRetrieve, || name.to_string_lossy().into_owned());
    // SAFETY: the context is live (the caller's use keeps it from being freed).
    let handle = unsafe { core.runtime.backend_lib.graph_retrieve(raw, name) }?;
    if handle.is_null() {
        return Err(Error::invalid_model(format!(
            "graphRetrieve returned a NULL handle for {name:?}"
        )));
    }
    Ok(handle)
}

impl GraphState {
    /// The graph's handle in the context handle `in_use` holds: retrieved again when that is
    /// not the one it was retrieved from (the context was created again after a device reset).
    fn handle_in(&self, in_use: &OwnedHandleUse) -> Result<sys::Qnn_GraphHandle_t> {
        let mut handle = lock(&self.handle);
        if handle.generation != in_use.generation {
            *handle = GraphHandle {
                generation: in_use.generation,
                raw: retrieve_raw(&self.context, in_use.raw, &self.c_name)?,
            };
        }
        Ok(handle.raw)
    }
}

impl Turn<'_> {
    /// Runs the graph once. `inputs[i]` must hold exactly `info().inputs[i].byte_size` bytes in
    /// the model's own data type, and `outputs[i]` exactly `info().outputs[i].byte_size`; QNN
    /// reads and writes these buffers directly. For data that needs converting, see
    /// [`io::execute`](crate::io::execute).
    pub fn execute(&self, inputs: &[&[u8]], outputs: &mut [&mut [u8]]) -> Result<ExecuteReport> {
        self.execute_profiled(inputs, outputs, None)
            .map(|(report, _)| report)
    }

    /// [`Turn::execute`], with a profile of this execute at `level` (the first execute at a
    /// level on a graph waits for the runtime's thread to create the graph's handle for it).
    /// The profile is `Some` when one was asked for, or when the graph's sampling
    /// ([`Graph::set_profile_every`]) took this execute.
    pub fn execute_profiled(
        &self,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
        level: Option<profile::Level>,
    ) -> Result<(ExecuteReport, Option<profile::Profile>)> {
        buffers::check_model_buffers(self.graph.info(), inputs, outputs)?;
        let places = Places {
            inputs: inputs.iter().map(|b| Place::client(b)).collect(),
            outputs: outputs.iter_mut().map(|b| Place::client_mut(b)).collect(),
        };
        // SAFETY: just checked; the buffers are borrowed for the call, the outputs exclusively.
        unsafe { self.execute_unchecked(&places, level) }
    }

    /// Runs the graph once on `places`, profiled at `level` if given (see
    /// [`Turn::execute_profiled`]).
    ///
    /// # Safety
    /// `places` must be [valid](Places) for the whole call.
    pub(crate) unsafe fn execute_unchecked(
        &self,
        places: &Places,
        level: Option<profile::Level>,
    ) -> Result<(ExecuteReport, Option<profile::Profile>)> {
        // SAFETY: the caller's contract.
        let result = unsafe { self.execute_recovering(places, level) };
        result.map_err(|error| recovery::answer(error, self.graph.name()))
    }

    /// [`Turn::execute_unchecked`], retried once when a device reset met it and its context
    /// was created again ([`Retry`]).
    ///
    /// # Safety
    /// As for [`Turn::execute_unchecked`].
    unsafe fn execute_recovering(
        &self,
        places: &Places,
        level: Option<profile::Level>,
    ) -> Result<(ExecuteReport, Option<profile::Profile>)> {
        let graph = self.graph;
        #[cfg(feature = "test-support")]
        crate::observe::hooks::panic_if_armed();
        let state = graph.state.get()?;
        let lib = &state.context.runtime.backend_lib;
        let profiling = graph.profiler.begin(&state.context.runtime, level)?;
        let mut retry = Retry::default();
        let report = loop {
            let (call, in_call) = ExecuteCall::begin(graph, Arc::clone(&state))?;
            // SAFETY: the caller's contract; the call's use keeps its context handle.
            let mut tensors = unsafe { self.tensors(places, &call.in_use) }?;
            // SAFETY: the graph handle is live (the call's `OwnedHandleUse` holds its
            // context), and holding the turn (`self`) serializes every execute on the handle.
            // The tensor arrays describe buffers of the metadata's sizes (the caller's
            // contract), outlive the call, and outputs are exclusively borrowed. The profile
            // handle is the graph's, used by this execute alone.
            let status = unsafe {
                lib.graph_execute(
                    &in_call.in_qnn,
                    call.handle,
                    tensors.arrays(),
                    profiling.as_ref().map_or(std::ptr::null_mut(), |p| p.raw()),
                )
            };
            let (started, generation) = (call.started, call.in_use.generation);
            // Checked in QNN still: a failure's text is asked of the library.
            let answered = call.answered("graphExecute", status);
            drop(in_call);
            match answered {
                Ok(report) => break (report, started),
                Err(error) => retry.after(&state.context, generation, error)?,
            }
        };
        let (report, started) = report;
        let report = ExecuteReport {
            recovery_ns: retry.recovery_ns,
            ..report
        };
        let profile = match profiling {
            Some(profiling) => graph
                .profiler
                .finish(profiling, started, report.execute_ns)?,
            None => None,
        };
        Ok((report, profile))
    }

    /// Queues one execute of `places` in the backend's asynchronous queue
    /// (`QnnGraph_executeAsync`) and returns; `done` gets its result on a thread of the
    /// backend's when QNN notifies it, or here when it could not be queued. Blocks while the
    /// backend's queue is full, so call it from a thread of the caller's own (the graph's
    /// worker). The context is kept from being freed until the notification.
    ///
    /// # Safety
    /// `places` must be [valid](Places), and its buffers unmoved and otherwise untouched,
    /// until `done` is called: QNN reads and writes them until it notifies.
    pub(crate) unsafe fn execute_async_unchecked(
        &self,
        places: Places,
        mut done: Box<dyn FnOnce(Result<ExecuteReport>) + Send>,
    ) {
        let graph = self.graph;
        let state = match graph.state.get() {
            Ok(state) => state,
            Err(error) => return done(Err(error)),
        };
        let mut retry = Retry::default();
        loop {
            let (call, in_call) = match ExecuteCall::begin(graph, Arc::clone(&state)) {
                Ok(begun) => begun,
                Err(error) => return done(Err(recovery::answer(error, graph.name()))),
            };
            // SAFETY: the caller's contract; the call's use keeps its context handle.
            let tensors = match unsafe { self.tensors(&places, &call.in_use) } {
                Ok(tensors) => tensors,
                Err(error) => return done(Err(recovery::answer(error, graph.name()))),
            };
            let (handle, generation) = (call.handle, call.in_use.generation);
            let call = Box::into_raw(Box::new(AsyncCall {
                tensors,
                call,
                recovery_ns: retry.recovery_ns,
                done,
            }));
            // SAFETY: the graph handle is live (the call's owned use keeps its context);
            // holding the turn orders the submissions. `call` owns the tensor arrays and is
            // leaked to QNN until the notification takes it back (`notify`, which accepts it),
            // or until the call fails below, when QNN will not notify; the buffers behind the
            // tensors are the caller's contract.
            let submitted = unsafe {
                state.context.runtime.backend_lib.graph_execute_async(
                    &in_call.in_qnn,
                    handle,
                    (*call).tensors.arrays(),
                    notify,
                    call.cast(),
                )
            };
            if matches!(submitted, Ok(status) if status.is_ok()) {
                return;
            }
            // SAFETY: nothing was queued, so QNN will not notify: `call` is still ours.
            let AsyncCall {
                call,
                done: kept_done,
                ..
            } = *unsafe { Box::from_raw(call) };
            let error = match submitted {
                Ok(status) => call.refused("graphExecuteAsync", status),
                Err(error) => Err(error),
            };
            drop(in_call);
            let error = error.err().unwrap_or(Error::Internal {
                message: "graphExecuteAsync refused without an error".into(),
            });
            done = kept_done;
            // Refused at the submission, so QNN has none of the buffers: the execute can be
            // submitted again once the context is created again (this is the graph's worker
            // thread, which may wait).
            if let Err(error) = retry.after(&state.context, generation, error) {
                return done(Err(recovery::answer(error, graph.name())));
            }
        }
    }

    /// The graph whose turn this is.
    pub fn graph(&self) -> &Graph {
        self.graph
    }
}

/// One execute in QNN, synchronous (`graphExecute`) or in the backend's queue
/// (`graphExecuteAsync`): its accounting, written once for both. [`ExecuteCall::begin`] takes a
/// use of the context's handle (kept until QNN has answered, so the context is not freed under
/// the execute even when it is closed or dropped meanwhile) and the permit to call QNN;
/// [`ExecuteCall::answered`] counts the execute, checks QNN's status and, after the graph's
/// first success, guards the process's exit.
struct ExecuteCall {
    state: Arc<GraphState>,
    /// Keeps the context (and so the graph's handle) from being freed until QNN has answered.
    in_use: OwnedHandleUse,
    /// The graph's handle in that context handle.
    handle: sys::Qnn_GraphHandle_t,
    /// When QNN was called: `execute_ns` counts from here to the answer.
    started: Instant,
}

impl ExecuteCall {
    /// The use of the handle, and what is held for the QNN call itself ([`InCall`]: for an
    /// asynchronous execute, until it is submitted).
    fn begin(graph: &Graph, state: Arc<GraphState>) -> Result<(ExecuteCall, InCall)> {
        let in_use = state.context.try_handle_owned()?;
        let handle = state.handle_in(&in_use)?;
        let in_call = InCall {
            _span: trace::span(Phase::GraphExecute, graph.name()),
            in_qnn: crate::base::exit::enter()?,
        };
        let call = ExecuteCall {
            state,
            in_use,
            handle,
            started: Instant::now(),
        };
        Ok((call, in_call))
    }

    /// QNN answered `op` with `status` (returned, or notified): counted in the
    /// [counters](crate::counters) with the time since the call, and checked.
    fn answered(self, op: &'static str, status: sys::Status) -> Result<ExecuteReport> {
        let execute_ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        counters::record_execute(execute_ns, !status.is_ok());
        self.state.context.runtime.backend_lib.check(op, status)?;
        // A load first, so that later executes only read the flag (no write on the hot path).
        if !self.state.executed.load(Relaxed) && !self.state.executed.swap(true, Relaxed) {
            // The first execute may have made QNN register exit-time destructors.
            crate::base::exit::guard_exit();
        }
        Ok(ExecuteReport {
            execute_ns,
            recovery_ns: None,
        })
    }

    /// QNN refused to queue the execute (and will not notify): the caller's error, but no
    /// execute ran, so none is counted.
    fn refused(self, op: &'static str, status: sys::Status) -> Result<ExecuteReport> {
        Err(self.state.context.runtime.backend_lib.error(op, status.0))
    }
}

/// Held for the QNN call itself: the `QnnGraph_execute` span (the whole call when it is
/// synchronous; the submission when it goes to the backend's queue, whose run we cannot see)
/// and the permit to be in QNN.
struct InCall {
    _span: trace::Span,
    in_qnn: crate::base::exit::InQnn,
}

/// An execute in the backend's asynchronous queue: what must live until QNN notifies it.
struct AsyncCall {
    /// Read by QNN until the notification.
    tensors: AsyncTensors,
    /// Holds the context until the notification.
    call: ExecuteCall,
    /// How long its submission waited for a recovery, if it did.
    recovery_ns: Option<u64>,
    done: Box<dyn FnOnce(Result<ExecuteReport>) + Send>,
}

/// QNN's notification of an asynchronous execute, on a thread of the backend's.
unsafe extern "C" fn notify(param: *mut std::ffi::c_void, status: sys::Qnn_NotifyStatus_t) {
    // A panic must not unwind into QNN; the reply's own guard answers the caller.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `param` is the `AsyncCall` leaked by `execute_async_unchecked`, notified once.
        let AsyncCall {
            tensors,
            call,
            recovery_ns,
            done,
        } = *unsafe { Box::from_raw(param.cast::<AsyncCall>()) };
        // QNN is done with the buffers; the context's use ends once `done` has the result.
        drop(tensors);
        let (context, generation) = (Arc::clone(&call.state.context), call.in_use.generation);
        let graph = call.state.c_name.to_string_lossy().into_owned();
        let result = match call.answered("graphExecuteAsync", sys::Status(status.error)) {
            Ok(report) => Ok(ExecuteReport {
                recovery_ns,
                ..report
            }),
            // Not retried from QNN's thread, which must not wait; the executes after it are.
            Err(error) if error.is_device_reset() => {
                Err(recovery::not_retried(&context, generation, graph, &error))
            }
            Err(error) => Err(error),
        };
        done(result);
    }));
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("name", &self.metadata.info.name)
            .field("closed", &self.is_closed())
            .finish()
    }
}
