//! `Context`: a context binary deserialized into a backend: its handle, who uses it, and its
//! close and free on the runtime's thread.
//!
//! A context is created again from the same binary when a device reset (a DSP subsystem
//! restart, SSR) kills it ([`LoadOptions::recover`], on by default): it keeps its source (the
//! file, read again and checked, or the bytes), the execute that met the reset waits for the
//! new context and is retried once on it, and the `Graph`s users hold keep working. How is
//! written in its own module, `context/recovery.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::base::closable::Closable;
use crate::base::error::{Error, Result};
pub use crate::base::sync::Done;
use crate::base::sync::blocking;
use crate::base::sync::lock;
use crate::exec::owner::Handles;
use crate::exec::runtime::{Runtime, RuntimeCore};
use crate::exec::shared::{self, BufferChoice, BufferPath, SharedPool};
use crate::exec::turn::TurnSlot;
use crate::ffi::loader::BackendLibrary;
use crate::model::metadata::{self, GraphInfo, GraphMetadata};
use crate::model::model_file;
use crate::model::preflight::{self, Finding, Mode, RuntimeSide};
use crate::observe::counters;
use crate::observe::ledger::{Alive, Held, Kind, Part, Site};
use crate::observe::trace::{self, Phase};
use crate::sys;

pub(crate) mod recovery;

use recovery::{Recovery, Source};

/// A raw context handle.
#[derive(Clone, Copy)]
struct RawContext(sys::Qnn_ContextHandle_t);
// SAFETY: an opaque token. QNN allows a context's graphs to be retrieved and executed from any
// thread; it is created and freed only on the runtime's owner thread.
unsafe impl Send for RawContext {}

/// The QNN context handle and the state graphs share with it.
pub(crate) struct ContextCore {
    pub runtime: Arc<RuntimeCore>,
    /// Itself, for the recovery a last [`HandleUse`] hands to the owner thread.
    me: Weak<ContextCore>,
    handle: Mutex<HandleState>,
    /// What it was loaded from and how, to create it again after a device reset; `None` when
    /// recovery is off.
    source: Option<Source>,
    options: LoadOptions,
    pub graphs: Vec<Arc<GraphMetadata>>,
    /// Where it was loaded from (its path, or `<binary N bytes>`): its name in a trace.
    name: Arc<str>,
    /// One turn per graph of the binary: QNN hands out the same handle each time a graph is
    /// retrieved, so every `Graph` retrieved for one name shares it.
    pub turns: Vec<Arc<TurnSlot>>,
    pub queue: ExecuteQueue,
    /// One pool of shared buffers per graph of the binary, or none (client buffers).
    pub shared: Vec<Arc<SharedPool>>,
    pub buffers: BufferPath,
}

/// Who uses the handle, and whether it is to be freed. A close never waits for the calls in
/// flight: the last of them hands the free to the owner thread, so the owner thread (which
/// every context of the runtime shares) never waits for an execute.
struct HandleState {
    /// `None` once the free has been handed to the owner thread, and while a recovery runs or
    /// after one failed.
    raw: Option<RawContext>,
    /// How many times the context was created again: the graph handles retrieved before a
    /// recovery are dead after it.
    generation: u64,
    /// A recovery asked for and not done yet: who waits for it.
    recovery: Option<Recovery>,
    /// Why the latest recovery failed: the context is down until a caller asks again.
    down: Option<String>,
    /// Calls using the handle now ([`HandleUse`]s).
    users: usize,
    /// Set by `close`: no new use; the free happens when `users` reaches zero, then `done`.
    closing: Option<Done<()>>,
    alive: Alive,
}

/// A use of the context handle for one QNN call: the handle is not freed meanwhile.
pub(crate) struct HandleUse<'a> {
    core: &'a ContextCore,
    raw: sys::Qnn_ContextHandle_t,
    /// The handle's generation ([`HandleState::generation`]).
    pub generation: u64,
}

impl std::ops::Deref for HandleUse<'_> {
    type Target = sys::Qnn_ContextHandle_t;
    fn deref(&self) -> &Self::Target {
        &self.raw
    }
}

impl Drop for HandleUse<'_> {
    fn drop(&mut self) {
        self.core.end_use();
    }
}

/// A [`HandleUse`] that owns its context: for a call that ends on another thread (an
/// asynchronous execute, until QNN notifies it).
pub(crate) struct OwnedHandleUse {
    core: Arc<ContextCore>,
    pub raw: sys::Qnn_ContextHandle_t,
    /// The handle's generation ([`HandleState::generation`]).
    pub generation: u64,
}

// SAFETY: the context handle is an opaque token QNN allows on any thread (see `RawContext`).
unsafe impl Send for OwnedHandleUse {}

impl Drop for OwnedHandleUse {
    fn drop(&mut self) {
        self.core.end_use();
    }
}

impl ContextCore {
    fn lock(&self) -> MutexGuard<'_, HandleState> {
        lock(&self.handle)
    }

    /// The handle for a QNN call, or `Closed` once the context is closing (a caller never waits
    /// for a free). While the context is being recovered from a device reset the caller waits
    /// for the recovery (the handle it would get is dead), and a context whose latest recovery
    /// failed is recovered again first.
    pub(crate) fn try_handle(&self) -> Result<HandleUse<'_>> {
        loop {
            let mut state = self.lock();
            if state.closing.is_some() {
                return Err(Error::Closed { what: "context" });
            }
            match state.raw {
                Some(raw) if state.recovery.is_none() => {
                    state.users += 1;
                    return Ok(HandleUse {
                        core: self,
                        raw: raw.0,
                        generation: state.generation,
                    });
                }
                _ if state.recovery.is_some() || state.down.is_some() => {
                    let generation = state.generation;
                    drop(state);
                    blocking(|done| self.recover_from(generation, done))?;
                }
                _ => return Err(Error::Closed { what: "context" }),
            }
        }
    }

    /// [`ContextCore::try_handle`] for a call that outlives the caller's borrow: the handle,
    /// and the use that keeps it from being freed until dropped.
    pub(crate) fn try_handle_owned(self: &Arc<Self>) -> Result<OwnedHandleUse> {
        let in_use = self.try_handle()?;
        let (raw, generation) = (in_use.raw, in_use.generation);
        // The use is handed to the owned guard: not ended here.
        std::mem::forget(in_use);
        Ok(OwnedHandleUse {
            core: Arc::clone(self),
            raw,
            generation,
        })
    }

    /// A use of the handle ended: the last one after a close hands the free on, the last one
    /// on a handle a device reset killed hands the recovery on.
    fn end_use(&self) {
        let mut state = self.lock();
        state.users -= 1;
        if state.users > 0 {
            return;
        }
        if state
            .recovery
            .as_ref()
            .is_some_and(Recovery::waits_for_users)
        {
            self.start_recovery(&mut state);
        } else if state.closing.is_some() && state.recovery.is_none() {
            let done = state.closing.take();
            self.free_later(&mut state, done, None);
        }
    }

    /// Frees the QNN context once the calls using it have returned; `done` gets the result,
    /// on the owner thread. Never waits.
    fn close_then(self: Arc<Self>, done: Done<()>) {
        let mut state = self.lock();
        if state.closing.is_some() {
            drop(state);
            return done(Err(Error::Closed { what: "context" }));
        }
        if state.recovery.is_some() {
            // The recovery frees what it makes, then answers.
            state.closing = Some(done);
            return;
        }
        if state.raw.is_none() {
            if state.down.is_none() {
                drop(state);
                return done(Err(Error::Closed { what: "context" }));
            }
            // Down after a failed recovery: nothing of QNN's to free.
            let alive = std::mem::replace(&mut state.alive, Alive::released());
            state.down = None;
            drop(state);
            drop(alive);
            return done(Ok(()));
        }
        if state.users == 0 {
            // This reference goes with the free, before the answer: a `Runtime::close` right
            // after it must find itself the runtime's last holder and free the handles there
            // and then (and report their errors), not leave that to a drop.
            self.free_later(&mut state, Some(done), Some(Arc::clone(&self)));
        } else {
            state.closing = Some(done);
        }
    }

    /// Hands the free to the owner thread, with nobody using the handle; `keep` is let go of
    /// there, before `done` answers.
    fn free_later(
        &self,
        state: &mut HandleState,
        done: Option<Done<()>>,
        keep: Option<Arc<ContextCore>>,
    ) {
        let Some(raw) = state.raw.take() else {
            return;
        };
        let alive = std::mem::replace(&mut state.alive, Alive::released());
        let name = Arc::clone(&self.name);
        let pools = self.shared.clone();
        self.runtime.owner.run(Box::new(move |handles| {
            let span = trace::span(Phase::ContextFree, &name);
            for pool in pools {
                pool.close();
            }
            let result = free_handle(&handles.lib, raw, alive);
            drop(span);
            drop(keep);
            if let Some(done) = done {
                done(result);
            }
        }));
    }
}

/// Frees a context handle; once exit has begun it is left to the process's end.
fn free_handle(lib: &BackendLibrary, raw: RawContext, mut alive: Alive) -> Result<()> {
    // SAFETY: the handle came from this backend's contextCreateFromBinary and, having been taken
    // out of its state with no call using it, is freed exactly once.
    match unsafe { lib.context_free(raw.0) } {
        Err(Error::Exiting) => Ok(()),
        result => {
            alive.release();
            result.inspect_err(|_| counters::record_release_error())
        }
    }
}

impl Drop for ContextCore {
    fn drop(&mut self) {
        // Nothing uses the context any more (every `HandleUse` borrows it). The free goes to
        // the owner thread; the drop never waits (it may run in the garbage collector on a
        // normal scheduler).
        let state = self.handle.get_mut().unwrap_or_else(|e| e.into_inner());
        let done = state.closing.take();
        let mut state = std::mem::replace(
            state,
            HandleState {
                raw: None,
                generation: 0,
                recovery: None,
                down: None,
                users: 0,
                closing: None,
                alive: Alive::released(),
            },
        );
        self.free_later(&mut state, done, None);
    }
}

/// A loaded context binary and the graphs it holds.
pub struct Context {
    graphs: Vec<GraphInfo>,
    /// The pre-flight verdict's warnings (rules that were not proven to refuse).
    warnings: Vec<Finding>,
    source: Option<PathBuf>,
    core: Closable<ContextCore>,
}

/// The default priority of a context's graphs (`QNN_CONTEXT_CONFIG_OPTION_PRIORITY`, the
/// levels of `Qnn_Priority_t`). QNN documents every level but low as possibly restricted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    Low,
    Normal,
    NormalHigh,
    High,
}

impl Priority {
    /// The `Qnn_Priority_t` value.
    pub const fn raw(self) -> u32 {
        match self {
            Priority::Low => sys::QNN_PRIORITY_LOW,
            Priority::Normal => sys::QNN_PRIORITY_NORMAL,
            Priority::NormalHigh => sys::QNN_PRIORITY_NORMAL_HIGH,
            Priority::High => sys::QNN_PRIORITY_HIGH,
        }
    }
}

/// How [`Context::load_with`] loads: the pre-flight verdict's mode, the context priority
/// (`None`: QNN's default, no config passed), the depth of the backend's asynchronous
/// execution queue to use when the backend has one (`None`: executes queue on the graphs'
/// worker threads), whether the context is created again when a device reset kills it
/// (`recover`, on by default: the context then keeps its source, see the module docs), and
/// whether its executes use shared buffers ([`crate::shared`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    pub preflight: Mode,
    pub priority: Option<Priority>,
    pub async_queue_depth: Option<u32>,
    pub recover: bool,
    pub shared_buffers: BufferChoice,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            preflight: Mode::default(),
            priority: None,
            async_queue_depth: None,
            recover: true,
            shared_buffers: BufferChoice::Auto,
        }
    }
}

/// Where a context's queued executes wait and run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecuteQueue {
    /// On each graph's own worker thread, which calls `graphExecute` (every backend).
    Worker,
    /// In the backend's asynchronous queue (`QnnGraph_executeAsync`), this deep: asked for with
    /// [`LoadOptions::async_queue_depth`] and granted when the backend says it has one.
    Backend { depth: u32 },
}

impl Context {
    /// Loads a context binary from a file (a regular file of at most
    /// [`DEFAULT_MAX_BYTES`](crate::model_file::DEFAULT_MAX_BYTES)), waiting for the runtime's
    /// thread to create it. `site` is its entry in the [ledger](crate::ledger).
    pub fn from_file(runtime: &Arc<Runtime>, path: &Path, site: &Site) -> Result<Arc<Context>> {
        let bytes = model_file::read(path, model_file::DEFAULT_MAX_BYTES)?;
        blocking(|done| Self::load_then(runtime, bytes, Some(path), site, done))
    }

    /// Loads a context binary from memory, waiting for the runtime's thread to create it.
    /// `site` is its entry in the [ledger](crate::ledger).
    pub fn from_bytes(runtime: &Arc<Runtime>, bytes: &[u8], site: &Site) -> Result<Arc<Context>> {
        blocking(|done| Self::load_then(runtime, bytes.to_vec(), None, site, done))
    }

    /// Loads `binary` without waiting, with the pre-flight verdict on ([`Mode::On`]); see
    /// [`Context::load_with`].
    pub fn load_then(
        runtime: &Arc<Runtime>,
        binary: Vec<u8>,
        source: Option<&Path>,
        site: &Site,
        done: Done<Arc<Context>>,
    ) {
        Self::load_with(runtime, binary, source, site, LoadOptions::default(), done)
    }

    /// Loads `binary` without waiting: its metadata is read here and judged against the runtime
    /// ([`preflight::check`] in `options.preflight`: a refusal is the load's error, and QNN is
    /// not asked), the context created with `options.priority` if given,
    /// the QNN context is created on the runtime's owner thread, and `done` gets the result
    /// there. `site` is its entry in the [ledger](crate::ledger); `source` the path it came
    /// from, if any.
    pub fn load_with(
        runtime: &Arc<Runtime>,
        binary: Vec<u8>,
        source: Option<&Path>,
        site: &Site,
        options: LoadOptions,
        done: Done<Arc<Context>>,
    ) {
        let _span = trace::span_lazy(Phase::ContextLoad, || describe(source, binary.len()));
        let prepared = runtime.core().and_then(|core| {
            let bytes = binary.as_slice();
            if bytes.is_empty() {
                return Err(Error::invalid_model("the context binary is empty"));
            }
            let span = trace::span_lazy(Phase::Metadata, || describe(source, bytes.len()));
            let read = metadata::read_binary(&core.system_lib, bytes)?;
            drop(span);
            let runtime_side = RuntimeSide::from(runtime.info());
            let verdict = preflight::check(&read.info, &runtime_side, options.preflight);
            if let Some(refusal) = verdict.refusals.into_iter().next() {
                return Err(refusal.into());
            }
            let mut held = vec![(Part::Binary, bytes.len() as u64)];
            held.extend(read.spill_fill_size.map(|n| (Part::SpillFill, n)));
            if options.recover && source.is_none() {
                held.push((Part::Source, bytes.len() as u64));
            }
            Ok((core, read.graphs, verdict.warnings, Held(held)))
        });
        let (core, graphs, warnings, held) = match prepared {
            Ok(prepared) => prepared,
            Err(error) => return done(Err(error)),
        };
        let path = source.map(Path::to_path_buf);
        let (keep, binary) = if options.recover {
            let (kept, binary) = Source::of(binary, path.as_deref());
            (Some(kept), binary)
        } else {
            (None, Arc::new(binary))
        };
        let site = site.clone();
        let owner = Arc::clone(&core);
        owner.owner.run(Box::new(move |handles| {
            let created = create(
                handles,
                core,
                graphs,
                &binary,
                options,
                Origin {
                    path,
                    source: keep,
                    site: site.as_str(),
                    held,
                },
            );
            // QNN keeps its own copy: the bytes go before the answer (unless kept to recover).
            drop(binary);
            done(created.map(|mut context| {
                if let Some(context) = Arc::get_mut(&mut context) {
                    context.warnings = warnings;
                }
                context
            }));
        }));
    }

    /// The pre-flight verdict's warnings: rules only read in Qualcomm's documentation that this
    /// binary does not meet, and build ids that could not be compared.
    pub fn warnings(&self) -> &[Finding] {
        &self.warnings
    }

    /// The graphs in the binary, in the order QnnSystem lists them (available after close too).
    pub fn graphs(&self) -> &[GraphInfo] {
        &self.graphs
    }

    /// The file this context was loaded from, if any.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Frees the QNN context now, after any execute running on one of its graphs returns.
    /// Its graphs report `Closed` afterwards. Closing twice is an error. Waits for the runtime's
    /// thread; see [`Context::close_then`].
    pub fn close(&self) -> Result<()> {
        blocking(|done| self.close_then(done))
    }

    /// Closes without waiting: the free runs on the runtime's owner thread (after running
    /// executes return) and `done` gets its result there.
    pub fn close_then(&self, done: Done<()>) {
        match self.core.close() {
            // The free waits for executes still running, but neither this caller nor the
            // owner thread waits for them.
            Ok(core) => core.close_then(done),
            Err(error) => done(Err(error)),
        }
    }

    /// Where its queued executes wait and run.
    pub fn execute_queue(&self) -> Result<ExecuteQueue> {
        Ok(self.core()?.queue)
    }

    /// Which buffers its executes use (decided at the load).
    pub fn buffers(&self) -> Result<BufferPath> {
        Ok(self.core()?.buffers.clone())
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    pub(crate) fn core(&self) -> Result<Arc<ContextCore>> {
        self.core.get()
    }
}

/// A context's name in the ledger and a trace: its path, or `<binary N bytes>`.
fn describe(source: Option<&Path>, len: usize) -> String {
    match source {
        Some(path) => path.display().to_string(),
        None => format!("<binary {len} bytes>"),
    }
}

/// Where a context comes from, as the context and its ledger entry record it.
struct Origin<'a> {
    /// The file it was loaded from, if any.
    path: Option<PathBuf>,
    /// What it is created again from after a device reset (`None`: recovery is off).
    source: Option<Source>,
    site: &'a str,
    /// What it holds on the host.
    held: Held,
}

/// Creates the QNN context, on the owner thread.
fn create(
    handles: &mut Handles,
    runtime: Arc<RuntimeCore>,
    graphs: Vec<Arc<GraphMetadata>>,
    bytes: &[u8],
    options: LoadOptions,
    origin: Origin<'_>,
) -> Result<Arc<Context>> {
    let Origin {
        path,
        source,
        site,
        held,
    } = origin;
    let lib = &handles.lib;
    let loaded_from: Arc<str> = describe(path.as_deref(), bytes.len()).into();
    // The backend's queue only where it says it executes asynchronously (Qualcomm's x86
    // emulator has the entry but answers "not supported").
    let queue = match options.async_queue_depth {
        Some(depth)
            if lib.has_execute_async()
                && lib.has_capability(sys::QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION) =>
        {
            ExecuteQueue::Backend { depth }
        }
        _ => ExecuteQueue::Worker,
    };
    let span = trace::span(Phase::CreateFromBinary, &loaded_from);
    let handle = create_handle(handles, bytes, &options, queue)?;
    drop(span);
    // SAFETY: the handle was made on this thread by this library and nothing executes in it yet.
    let chosen = unsafe {
        shared::choose(
            options.shared_buffers,
            &runtime.rpcmem_lib,
            &handles.lib,
            &graphs,
            handle.0,
            &loaded_from,
        )
    };
    let (shared, buffers) = match chosen {
        Ok(chosen) => chosen,
        Err(error) => {
            // SAFETY: made just above, used by nothing else, freed once.
            let _ = unsafe { handles.lib.context_free(handle.0) };
            return Err(error);
        }
    };
    let infos: Vec<GraphInfo> = graphs.iter().map(|g| g.info.clone()).collect();
    let names: Vec<&str> = infos.iter().map(|g| g.name.as_str()).collect();
    let detail = format!("{loaded_from} (graphs: {})", names.join(", "));
    let core = Arc::new_cyclic(|me| ContextCore {
        runtime,
        me: me.clone(),
        handle: Mutex::new(HandleState {
            raw: Some(handle),
            generation: 0,
            recovery: None,
            down: None,
            users: 0,
            closing: None,
            alive: Alive::holding(Kind::Context, site, detail, held),
        }),
        source,
        options,
        turns: graphs.iter().map(|_| Arc::default()).collect(),
        graphs,
        name: loaded_from,
        queue,
        shared,
        buffers,
    });
    Ok(Arc::new(Context {
        graphs: infos,
        warnings: Vec::new(),
        source: path,
        core: Closable::from_arc("context", core),
    }))
}

/// `contextCreateFromBinary` with the configs `options` and `queue` ask for, on the owner
/// thread: at the load, and again after a device reset.
fn create_handle(
    handles: &mut Handles,
    bytes: &[u8],
    options: &LoadOptions,
    queue: ExecuteQueue,
) -> Result<RawContext> {
    let lib = &handles.lib;
    // A NULL-terminated list of configs, or NULL for QNN's defaults.
    let configs: Vec<sys::QnnContext_Config_t> = options
        .priority
        .map(|p| sys::QnnContext_Config_t::priority(p.raw()))
        .into_iter()
        .chain(match queue {
            ExecuteQueue::Backend { depth } => {
                Some(sys::QnnContext_Config_t::async_execution_queue_depth(depth))
            }
            ExecuteQueue::Worker => None,
        })
        .collect();
    let config_list: Vec<*const sys::QnnContext_Config_t> = configs
        .iter()
        .map(|c| c as *const _)
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let config = if configs.is_empty() {
        std::ptr::null()
    } else {
        config_list.as_ptr()
    };
    // SAFETY: backend/device are live handles of this library, created on this thread; the
    // config list is NULL or NULL-terminated and outlives the call.
    let handle =
        unsafe { lib.context_create_from_binary(handles.backend, handles.device, config, bytes) }?;
    if handle.is_null() {
        return Err(Error::invalid_model(
            "contextCreateFromBinary returned a NULL context",
        ));
    }
    // Deserializing may have made QNN register exit-time destructors; ours must run first.
    crate::base::exit::guard_exit();
    Ok(RawContext(handle))
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field(
                "graphs",
                &self.graphs.iter().map(|g| &g.name).collect::<Vec<_>>(),
            )
            .field("closed", &self.is_closed())
            .finish()
    }
}
