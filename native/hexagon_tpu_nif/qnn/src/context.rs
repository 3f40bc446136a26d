//! `Context`: a context binary deserialized into a backend.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, TryLockError};

use crate::closable::Closable;
use crate::counters;
use crate::error::{Error, Result};
use crate::ledger::{Alive, Kind, Site};
use crate::loader::BackendLibrary;
use crate::metadata::{self, GraphInfo, GraphMetadata};
use crate::model_file::{self, ModelBytes};
use crate::owner::{Handles, blocking};
use crate::runtime::{Runtime, RuntimeCore};
use crate::sys;
use crate::turn::TurnSlot;

/// A raw context handle on its way to the owner thread to be freed.
struct SendHandle(sys::Qnn_ContextHandle_t);
// SAFETY: an opaque token; it is only passed to `contextFree`, on the runtime's owner thread.
unsafe impl Send for SendHandle {}

/// The QNN context handle and the state graphs share with it.
pub(crate) struct ContextCore {
    pub runtime: Arc<RuntimeCore>,
    /// `Some` until the context is freed. Executes hold the read lock for the duration of
    /// `graphExecute`; freeing takes the write lock, on the runtime's owner thread, so it waits
    /// for them there and nowhere else.
    handle: RwLock<Option<sys::Qnn_ContextHandle_t>>,
    pub graphs: Vec<Arc<GraphMetadata>>,
    /// One turn per graph of the binary: QNN hands out the same handle each time a graph is
    /// retrieved, so every `Graph` retrieved for one name shares it.
    pub turns: Vec<Arc<TurnSlot>>,
    alive: Mutex<Alive>,
}

// SAFETY: the context handle is an opaque token. It is created and freed on the runtime's owner
// thread; QNN allows its graphs to be retrieved and executed from any thread. Freeing is
// serialized against every use by `handle`'s write lock.
unsafe impl Send for ContextCore {}
// SAFETY: as above; concurrent executes on different graphs of one context are allowed by QNN,
// and each graph's turn serializes its own executes.
unsafe impl Sync for ContextCore {}

impl ContextCore {
    /// The handle for a QNN call, or `Closed` while it is being freed (the free is the only
    /// writer; a caller never waits for it).
    pub(crate) fn try_handle(
        &self,
    ) -> Result<RwLockReadGuard<'_, Option<sys::Qnn_ContextHandle_t>>> {
        match self.handle.try_read() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(e)) => Ok(e.into_inner()),
            Err(TryLockError::WouldBlock) => Err(Error::Closed { what: "context" }),
        }
    }

    /// Frees the QNN context once, after every running execute has returned. Runs on the owner
    /// thread.
    fn free(&self) -> Result<()> {
        let mut handle = self.handle.write().unwrap_or_else(|e| e.into_inner());
        let Some(raw) = handle.take() else {
            return Ok(());
        };
        let alive = std::mem::replace(
            &mut *self.alive.lock().unwrap_or_else(|e| e.into_inner()),
            Alive::released(),
        );
        free_handle(&self.runtime.backend_lib, raw, alive)
    }
}

fn free_handle(
    lib: &BackendLibrary,
    raw: sys::Qnn_ContextHandle_t,
    mut alive: Alive,
) -> Result<()> {
    // SAFETY: the handle came from this backend's contextCreateFromBinary and, having been taken
    // out of its lock, is freed exactly once with no execute in flight.
    let status = sys::Status(unsafe { (lib.fns.context_free)(raw, std::ptr::null_mut()) });
    alive.release();
    lib.check("contextFree", status)
        .inspect_err(|_| counters::record_release_error())
}

impl Drop for ContextCore {
    fn drop(&mut self) {
        // Nothing runs on the context any more. The free goes to the owner thread; the drop
        // never waits (it may run in the garbage collector on a normal scheduler).
        let raw = self
            .handle
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(raw) = raw {
            let raw = SendHandle(raw);
            let alive = std::mem::replace(
                self.alive.get_mut().unwrap_or_else(|e| e.into_inner()),
                Alive::released(),
            );
            // Errors are already counted in `release_errors`.
            self.runtime.owner.run(Box::new(move |handles| {
                let raw = raw;
                let _ = free_handle(&handles.lib, raw.0, alive);
            }));
        }
    }
}

/// Where a context binary comes from.
pub enum Binary {
    /// Read or mapped from a file.
    File(ModelBytes),
    /// Bytes handed over by the caller.
    Owned(Vec<u8>),
}

impl Binary {
    fn as_slice(&self) -> &[u8] {
        match self {
            Binary::File(bytes) => bytes.as_slice(),
            Binary::Owned(bytes) => bytes,
        }
    }
}

/// A loaded context binary and the graphs it holds.
pub struct Context {
    graphs: Vec<GraphInfo>,
    source: Option<PathBuf>,
    core: Closable<ContextCore>,
}

/// A callback that receives the result of an operation handed to another thread.
pub type Done<T> = Box<dyn FnOnce(Result<T>) + Send>;

impl Context {
    /// Loads a context binary from a file (a regular file of at most
    /// [`DEFAULT_MAX_BYTES`](crate::model_file::DEFAULT_MAX_BYTES)), waiting for the runtime's
    /// thread to create it. `site` is its entry in the [ledger](crate::ledger).
    pub fn from_file(runtime: &Arc<Runtime>, path: &Path, site: &Site) -> Result<Arc<Context>> {
        let bytes = model_file::read(path, model_file::DEFAULT_MAX_BYTES)?;
        blocking(|done| Self::load_then(runtime, Binary::File(bytes), Some(path), site, done))
    }

    /// Loads a context binary from memory, waiting for the runtime's thread to create it.
    /// `site` is its entry in the [ledger](crate::ledger).
    pub fn from_bytes(runtime: &Arc<Runtime>, bytes: &[u8], site: &Site) -> Result<Arc<Context>> {
        blocking(|done| Self::load_then(runtime, Binary::Owned(bytes.to_vec()), None, site, done))
    }

    /// Loads `binary` without waiting: its metadata is read here, the QNN context is created on
    /// the runtime's owner thread, and `done` gets the result there. `site` is its entry in the
    /// [ledger](crate::ledger); `source` the path it came from, if any.
    pub fn load_then(
        runtime: &Arc<Runtime>,
        binary: Binary,
        source: Option<&Path>,
        site: &Site,
        done: Done<Arc<Context>>,
    ) {
        let prepared = runtime.core().and_then(|core| {
            let bytes = binary.as_slice();
            if bytes.is_empty() {
                return Err(Error::invalid_model("the context binary is empty"));
            }
            let graphs = metadata::read_graphs(&core.system_lib, bytes)?;
            Ok((core, graphs))
        });
        let (core, graphs) = match prepared {
            Ok(prepared) => prepared,
            Err(error) => return done(Err(error)),
        };
        let source = source.map(Path::to_path_buf);
        let site = site.clone();
        let owner = Arc::clone(&core);
        owner.owner.run(Box::new(move |handles| {
            let created = create(handles, core, graphs, &binary, source, site.as_str());
            // QNN keeps its own copy: the bytes (or the file's mapping) go before the answer.
            drop(binary);
            done(created);
        }));
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
            Ok(core) => {
                let owner = Arc::clone(&core.runtime);
                owner.owner.run(Box::new(move |_| {
                    let result = core.free();
                    // Let go of the runtime before answering: a `Runtime::close` right after
                    // this returns must find itself the last holder and free the handles
                    // there and then (and report their errors), not leave that to a drop.
                    drop(core);
                    done(result)
                }));
            }
            Err(error) => done(Err(error)),
        }
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    pub(crate) fn core(&self) -> Result<Arc<ContextCore>> {
        self.core.get()
    }
}

/// Creates the QNN context, on the owner thread.
fn create(
    handles: &mut Handles,
    runtime: Arc<RuntimeCore>,
    graphs: Vec<Arc<GraphMetadata>>,
    binary: &Binary,
    source: Option<PathBuf>,
    site: &str,
) -> Result<Arc<Context>> {
    let bytes = binary.as_slice();
    let lib = &handles.lib;
    let mut handle: sys::Qnn_ContextHandle_t = std::ptr::null_mut();
    // SAFETY: backend/device are live handles of this library, created on this thread; the
    // binary is valid for `len` bytes during the call (QNN copies what it keeps); `handle` is
    // writable.
    let status = sys::Status(unsafe {
        (lib.fns.context_create_from_binary)(
            handles.backend,
            handles.device,
            std::ptr::null(),
            bytes.as_ptr().cast(),
            bytes.len() as u64,
            &mut handle,
            std::ptr::null_mut(),
        )
    });
    lib.check("contextCreateFromBinary", status)?;
    if handle.is_null() {
        return Err(Error::invalid_model(
            "contextCreateFromBinary returned a NULL context",
        ));
    }
    let infos: Vec<GraphInfo> = graphs.iter().map(|g| g.info.clone()).collect();
    let loaded_from = match &source {
        Some(path) => path.display().to_string(),
        None => format!("<binary {} bytes>", bytes.len()),
    };
    let names: Vec<&str> = infos.iter().map(|g| g.name.as_str()).collect();
    let detail = format!("{loaded_from} (graphs: {})", names.join(", "));
    let core = ContextCore {
        runtime,
        handle: RwLock::new(Some(handle)),
        turns: graphs.iter().map(|_| Arc::default()).collect(),
        graphs,
        alive: Mutex::new(Alive::new(Kind::Context, site, detail)),
    };
    Ok(Arc::new(Context {
        graphs: infos,
        source,
        core: Closable::new("context", core),
    }))
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
