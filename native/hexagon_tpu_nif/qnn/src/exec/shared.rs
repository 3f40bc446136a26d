//! Shared buffers: a graph's input and output tensors in rpcmem memory registered with its
//! context (`QnnMem_register`), so that FastRPC maps them to the DSP instead of copying every
//! input in and every output out (what ONNX Runtime's QNN EP, ExecuTorch and LiteRT do on the
//! device).
//!
//! Each graph of a context loaded with shared buffers has a [`SharedPool`]: buffers for each of
//! its tensors, kept and reused across executes. An execute takes one buffer per tensor
//! (`SharedPool::take`); quantization writes straight into an input's, and an output's goes
//! back to its caller as a [`SharedBuffer`], which returns to the pool when dropped (in the
//! NIF, when the Elixir binary over it is garbage-collected), so no host copy of an output is
//! made. Up to [`KEEP_FREE`] buffers per tensor wait in the pool; one returned beyond that is
//! deregistered and freed.
//!
//! Registrations belong to a context handle. A buffer is registered at its first use in a
//! handle (the handle's generation changes when a device reset made the context be created
//! again, and the old registrations died with it). `SharedPool::forget` deregisters them all
//! before a dead handle is freed, `SharedPool::close` before the context is freed; both run
//! on the runtime's thread with no execute using the handle, and hold the pool's lock, so a
//! buffer returned meanwhile never deregisters from a freed context. A handle QNN is given is
//! always one `memRegister` returned for that very buffer in that very context (Qualcomm's
//! emulator crashed on any other).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use crate::base::error::{Error, Result};
use crate::base::sync::lock;
use crate::ffi::loader::BackendLibrary;
use crate::ffi::log::{self, LogLevel};
use crate::ffi::rpcmem::{self, RpcBuffer, Rpcmem};
use crate::model::metadata::GraphMetadata;
use crate::observe::counters;
use crate::sys;

/// rpcmem's library on the device (Qualcomm's FastRPC client, in the board's image).
pub const DEFAULT_RPCMEM_LIB: &str = "libcdsprpc.so";

/// Free buffers a pool keeps per tensor: enough for the executes a graph has in flight and the
/// outputs a caller typically holds; more are freed as they come back.
pub const KEEP_FREE: usize = 4;

/// Whether a context's executes are to use shared buffers: the choice made at the load
/// (`LoadOptions::shared_buffers`); what it got is its [`BufferPath`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BufferChoice {
    /// Shared buffers where rpcmem and the backend's QnnMem work; client buffers otherwise,
    /// with the reason logged once and counted (`shared_buffer_fallbacks`).
    #[default]
    Auto,
    /// Shared buffers, or the load fails with [`Error::SharedBuffersUnavailable`].
    On,
    /// Client buffers (some models run faster without shared memory: the choice is per
    /// model).
    Off,
}

/// Which buffers a context's executes use, and why: what its [`BufferChoice`] got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BufferPath {
    /// Registered rpcmem buffers, one pool per graph.
    Shared,
    /// Client buffers, as asked ([`BufferChoice::Off`]).
    Client,
    /// Client buffers, because shared ones were not available: why.
    Fallback(String),
}

/// One tensor of the graph, as its buffers are made and registered.
struct Slot {
    name: String,
    dims: Vec<u32>,
    data_type: u32,
    bytes: usize,
}

/// A graph's shared buffers (see the module docs).
pub struct SharedPool {
    rpcmem: Arc<Rpcmem>,
    lib: Arc<BackendLibrary>,
    /// The graph's inputs, then its outputs.
    slots: Vec<Slot>,
    inputs: usize,
    state: Mutex<PoolState>,
}

struct PoolState {
    /// Per slot, the buffers not lent out.
    free: Vec<Vec<RpcBuffer>>,
    /// The registrations made, by the buffer's file descriptor (unique while the buffer
    /// lives; a buffer's entry goes before the buffer is freed): the generation of the context
    /// handle it was made in, and its handle.
    registered: HashMap<i32, (u64, sys::Qnn_MemHandle_t)>,
    /// Set when the context is freed: buffers coming back are freed.
    closed: bool,
}

// SAFETY: the memory handles are opaque tokens QNN accepts from any thread; they are only used
// under the state's lock or by an execute holding a use of their context handle.
unsafe impl Send for PoolState {}

impl SharedPool {
    fn new(rpcmem: Arc<Rpcmem>, lib: Arc<BackendLibrary>, graph: &GraphMetadata) -> Arc<Self> {
        let info = &graph.info;
        let tensors = (info.inputs.iter().zip(&graph.input_templates))
            .chain(info.outputs.iter().zip(&graph.output_templates));
        let slots: Vec<Slot> = tensors
            .map(|(tensor, template)| {
                let (dims, data_type) = template.shape();
                Slot {
                    name: tensor.name.clone(),
                    dims: dims.to_vec(),
                    data_type,
                    bytes: tensor.byte_size,
                }
            })
            .collect();
        Arc::new(SharedPool {
            rpcmem,
            lib,
            state: Mutex::new(PoolState {
                free: slots.iter().map(|_| Vec::new()).collect(),
                registered: HashMap::new(),
                closed: false,
            }),
            inputs: info.inputs.len(),
            slots,
        })
    }

    /// A buffer for input `index`.
    pub(crate) fn take_input(self: &Arc<Self>, index: usize) -> Result<SharedBuffer> {
        self.take(index)
    }

    /// A buffer for output `index`.
    pub(crate) fn take_output(self: &Arc<Self>, index: usize) -> Result<SharedBuffer> {
        self.take(self.inputs + index)
    }

    /// A buffer of `slot`'s size: a free one, or a new one from rpcmem.
    fn take(self: &Arc<Self>, slot: usize) -> Result<SharedBuffer> {
        let kept = {
            let mut state = lock(&self.state);
            if state.closed {
                return Err(Error::Closed { what: "context" });
            }
            state.free[slot].pop()
        };
        let buffer = match kept {
            Some(buffer) => buffer,
            None => self.alloc(slot).map_err(|why| Error::Internal {
                message: why.to_string(),
            })?,
        };
        Ok(self.lend(slot, buffer))
    }

    /// A new buffer of `slot`'s size, from rpcmem.
    fn alloc(&self, slot: usize) -> Result<RpcBuffer, Unavailable> {
        let slot_of = &self.slots[slot];
        let buffer = self
            .rpcmem
            .alloc(slot_of.bytes)
            .map_err(|why| Unavailable::Alloc {
                tensor: slot_of.name.clone(),
                why,
            })?;
        counters::record_shared_buffer(true);
        Ok(buffer)
    }

    /// `buffer`, of `slot`'s size, lent out.
    fn lend(self: &Arc<Self>, slot: usize, buffer: RpcBuffer) -> SharedBuffer {
        SharedBuffer {
            buffer: Some(buffer),
            slot,
            pool: Arc::clone(self),
        }
    }

    /// The memory handle of `buffer` in the context handle `context` of `generation`,
    /// registering it there first if it is not yet.
    ///
    /// # Safety
    /// `context` is a live context handle of this pool's library, of `generation`, kept from
    /// being freed by the caller's use until QNN is done with the handle returned.
    pub(crate) unsafe fn handle(
        &self,
        buffer: &SharedBuffer,
        context: sys::Qnn_ContextHandle_t,
        generation: u64,
    ) -> Result<sys::Qnn_MemHandle_t> {
        let fd = buffer.fd();
        let mut state = lock(&self.state);
        if let Some(&(made_in, handle)) = state.registered.get(&fd)
            && made_in == generation
        {
            return Ok(handle);
        }
        let slot = &self.slots[buffer.slot];
        // SAFETY: the context per the caller's contract; `fd` is an rpcmem buffer of the
        // slot's byte size, alive while `buffer` is borrowed.
        let handle = unsafe {
            self.lib
                .mem_register(context, fd, &slot.dims, slot.data_type)
        }?;
        counters::record_shared_registration();
        state.registered.insert(fd, (generation, handle));
        Ok(handle)
    }

    /// Deregisters every registration (before a dead context handle is freed, on the runtime's
    /// thread); the buffers stay, to be registered again in the handle made next. Errors are
    /// ignored: after a device reset QNN answers the reset's code, and the free ends them
    /// anyway.
    pub(crate) fn forget(&self) {
        let mut state = lock(&self.state);
        self.deregister_all(&mut state);
    }

    /// Deregisters every registration and frees the buffers waiting in the pool, before the
    /// context is freed (on the runtime's thread, with no execute using it). Buffers lent out
    /// are freed when they come back.
    pub(crate) fn close(&self) {
        let mut state = lock(&self.state);
        self.deregister_all(&mut state);
        state.closed = true;
        let free: Vec<Vec<RpcBuffer>> = state.free.iter_mut().map(std::mem::take).collect();
        drop(state);
        for buffer in free.into_iter().flatten() {
            drop(buffer);
            counters::record_shared_buffer(false);
        }
    }

    fn deregister_all(&self, state: &mut PoolState) {
        let handles: Vec<sys::Qnn_MemHandle_t> =
            state.registered.drain().map(|(_, (_, h))| h).collect();
        // SAFETY: each handle came from this library's memRegister in the context still
        // live (the callers run before it is freed, with no execute using it), and leaves
        // the map here, so it is deregistered once.
        let _ = unsafe { self.lib.mem_deregister(&handles) };
    }

    /// A buffer lent out came back: kept in the pool, or deregistered and freed.
    fn give_back(&self, slot: usize, buffer: RpcBuffer) {
        let mut state = lock(&self.state);
        if !state.closed && state.free[slot].len() < KEEP_FREE {
            return state.free[slot].push(buffer);
        }
        if let Some((_, handle)) = state.registered.remove(&buffer.fd) {
            // SAFETY: made by this library in the context, which is live (the pool is not
            // closed: `close` empties the map, under this lock, before the context is freed);
            // the buffer is back, so no execute uses it.
            let _ = unsafe { self.lib.mem_deregister(&[handle]) };
        }
        drop(state);
        drop(buffer);
        counters::record_shared_buffer(false);
    }
}

/// A buffer of a graph's [`SharedPool`], lent to one execute (and, for an output in the model's
/// own type, to the caller after it): back in the pool when dropped.
pub struct SharedBuffer {
    /// `Some` until dropped.
    buffer: Option<RpcBuffer>,
    slot: usize,
    pool: Arc<SharedPool>,
}

impl SharedBuffer {
    fn fd(&self) -> i32 {
        self.buffer.as_ref().map_or(-1, |b| b.fd)
    }

    /// Its memory handle in the context handle `context` of `generation` (see
    /// [`SharedPool::handle`], whose contract this has).
    ///
    /// # Safety
    /// As for [`SharedPool::handle`].
    pub(crate) unsafe fn handle(
        &self,
        context: sys::Qnn_ContextHandle_t,
        generation: u64,
    ) -> Result<sys::Qnn_MemHandle_t> {
        // SAFETY: the caller's contract.
        unsafe { self.pool.handle(self, context, generation) }
    }
}

impl std::ops::Deref for SharedBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buffer.as_deref().unwrap_or_default()
    }
}

impl std::ops::DerefMut for SharedBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buffer.as_deref_mut().unwrap_or_default()
    }
}

impl Drop for SharedBuffer {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.give_back(self.slot, buffer);
        }
    }
}

impl std::fmt::Debug for SharedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBuffer")
            .field("tensor", &self.pool.slots[self.slot].name)
            .field("len", &self.len())
            .finish()
    }
}

/// The shared buffers `choice` asks for, set up in the new context handle `context` (of
/// `lib`; its name `name`, for the log): the pools and [`BufferPath::Shared`], or none and
/// the reason ([`BufferPath::Client`], [`BufferPath::Fallback`], logged and counted), or
/// [`Error::SharedBuffersUnavailable`] when they were required.
///
/// # Safety
/// As for [`set_up`].
pub(crate) unsafe fn choose(
    choice: BufferChoice,
    rpcmem_lib: &Path,
    lib: &Arc<BackendLibrary>,
    graphs: &[Arc<GraphMetadata>],
    context: sys::Qnn_ContextHandle_t,
    name: &str,
) -> Result<(Vec<Arc<SharedPool>>, BufferPath)> {
    if choice == BufferChoice::Off {
        return Ok((Vec::new(), BufferPath::Client));
    }
    // SAFETY: the caller's contract.
    match unsafe { set_up(rpcmem_lib, lib, graphs, context) } {
        Ok(pools) => {
            counters::record_shared_buffer_context();
            Ok((pools, BufferPath::Shared))
        }
        Err(why) if choice == BufferChoice::On => Err(Error::SharedBuffersUnavailable {
            why: why.to_string(),
        }),
        Err(why) => {
            let why = why.to_string();
            log_fallback(lib, name, &why);
            Ok((Vec::new(), BufferPath::Fallback(why)))
        }
    }
}

/// Why a context cannot have shared buffers: what [`set_up`] met. Its text is what
/// [`BufferPath::Fallback`] and [`Error::SharedBuffersUnavailable`] say.
#[derive(Debug)]
pub(crate) enum Unavailable {
    /// rpcmem's library could not be opened, or lacks a function of rpcmem.h.
    Rpcmem(String),
    /// The backend has no `QnnMem_register`.
    NoQnnMem { backend: PathBuf },
    /// rpcmem could not allocate the buffer of `tensor`.
    Alloc { tensor: String, why: String },
    /// A buffer could not be registered with the context (QNN's error).
    Register(Error),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Rpcmem(why) => f.write_str(why),
            Unavailable::NoQnnMem { backend } => {
                write!(
                    f,
                    "the backend {} has no QnnMem_register",
                    backend.display()
                )
            }
            Unavailable::Alloc { tensor, why } => write!(f, "shared buffer for `{tensor}`: {why}"),
            // Our own refusals (a NULL handle, no memRegister) say just what happened.
            Unavailable::Register(Error::Internal { message }) => f.write_str(message),
            Unavailable::Register(error) => write!(f, "{error}"),
        }
    }
}

/// The pools of a context's graphs, made on the runtime's thread right after the context
/// handle `context`: rpcmem opened from `rpcmem_lib`, and one buffer per tensor allocated and
/// registered, so that a context that cannot have shared buffers knows at its load.
///
/// # Safety
/// `context` is a live context handle of `lib`, made on this thread, with no execute yet.
unsafe fn set_up(
    rpcmem_lib: &Path,
    lib: &Arc<BackendLibrary>,
    graphs: &[Arc<GraphMetadata>],
    context: sys::Qnn_ContextHandle_t,
) -> Result<Vec<Arc<SharedPool>>, Unavailable> {
    let rpcmem = rpcmem::open(rpcmem_lib).map_err(Unavailable::Rpcmem)?;
    if !lib.has_mem() {
        return Err(Unavailable::NoQnnMem {
            backend: lib.path.clone(),
        });
    }
    let mut pools = Vec::with_capacity(graphs.len());
    for graph in graphs {
        let pool = SharedPool::new(Arc::clone(&rpcmem), Arc::clone(lib), graph);
        pools.push(Arc::clone(&pool));
        let warmed = (0..pool.slots.len()).try_for_each(|slot| {
            let buffer = pool.lend(slot, pool.alloc(slot)?);
            // SAFETY: the caller's contract.
            unsafe { pool.handle(&buffer, context, 0) }
                .map(drop)
                .map_err(Unavailable::Register)
        });
        if let Err(why) = warmed {
            for pool in &pools {
                pool.close();
            }
            return Err(why);
        }
    }
    Ok(pools)
}

/// Logs once per process and reason that a context's executes fall back to client buffers.
fn log_fallback(lib: &BackendLibrary, context: &str, why: &str) {
    static LOGGED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Default::default);
    counters::record_shared_buffer_fallback();
    let mut logged = lock(&LOGGED);
    if logged.insert(why.to_string()) {
        let said = log::notice(
            LogLevel::Warn,
            lib,
            format!(
                "hexagon_tpu: shared buffers are not available ({why}); {context}, and every \
                 later context for this reason, executes with client buffers (said once; \
                 load with shared_buffers: false to ask for them)"
            ),
        );
        if !said {
            // Dropped by the rate limit: the next context with this reason says it.
            logged.remove(why);
        }
    }
}
