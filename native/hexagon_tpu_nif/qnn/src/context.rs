//! `Context`: a context binary deserialized into a backend.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::closable::Closable;

use crate::counters;
use crate::error::{Error, Result};
use crate::ledger::{self, Alive, Kind};
use crate::metadata::{self, GraphInfo, GraphMetadata};
use crate::runtime::{Runtime, RuntimeCore};
use crate::sys;

/// The QNN context handle and the state graphs share with it.
pub(crate) struct ContextCore {
    pub runtime: Arc<RuntimeCore>,
    /// `Some` until the context is freed. Executes hold the read lock for the duration of
    /// `graphExecute`, so freeing (which takes the write lock) waits for them.
    pub handle: RwLock<Option<sys::Qnn_ContextHandle_t>>,
    pub graphs: Vec<Arc<GraphMetadata>>,
    /// One lock per graph of the binary, held for the whole `graphExecute`: QNN hands out the
    /// same handle each time a graph is retrieved, so every `Graph` retrieved for one name
    /// shares its lock.
    pub execute_locks: Vec<Mutex<()>>,
    alive: Mutex<Alive>,
}

// SAFETY: the context handle is an opaque token; QNN allows a context to be used and freed from
// any thread. Freeing is serialized against every use by `handle`'s write lock.
unsafe impl Send for ContextCore {}
// SAFETY: as above; concurrent executes on different graphs of one context are allowed by QNN,
// and each graph serializes its own executes.
unsafe impl Sync for ContextCore {}

impl ContextCore {
    /// Frees the QNN context once, after every running execute has returned.
    pub(crate) fn free(&self) -> Result<()> {
        let mut handle = self.handle.write().unwrap_or_else(|e| e.into_inner());
        let Some(raw) = handle.take() else {
            return Ok(());
        };
        self.alive
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release();
        // SAFETY: the handle came from this backend's contextCreateFromBinary and, having been
        // taken out of the lock, is freed exactly once with no execute in flight.
        let status =
            unsafe { (self.runtime.backend_lib.fns.context_free)(raw, std::ptr::null_mut()) };
        if status != 0 {
            counters::record_release_error();
            return Err(Error::qnn("contextFree", status));
        }
        Ok(())
    }
}

impl Drop for ContextCore {
    fn drop(&mut self) {
        // Errors are already counted in `release_errors`.
        let _ = self.free();
    }
}

/// A loaded context binary and the graphs it holds.
pub struct Context {
    graphs: Vec<GraphInfo>,
    source: Option<PathBuf>,
    core: Closable<ContextCore>,
}

impl Context {
    /// Loads a context binary from a file. The file is read once, handed to QNN, and its
    /// buffer released before this returns. The caller's `file:line` is its site in the
    /// [ledger].
    #[track_caller]
    pub fn from_file(runtime: &Arc<Runtime>, path: &Path) -> Result<Arc<Context>> {
        let site = ledger::location_site(std::panic::Location::caller());
        Self::from_file_at(runtime, path, &site)
    }

    /// [`Context::from_file`], entered in the [ledger] with `site`.
    pub fn from_file_at(runtime: &Arc<Runtime>, path: &Path, site: &str) -> Result<Arc<Context>> {
        let bytes = std::fs::read(path).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let context = Self::load(runtime, &bytes, Some(path), site)?;
        drop(bytes);
        Ok(context)
    }

    /// Loads a context binary from memory. The caller's `file:line` is its site in the
    /// [ledger].
    #[track_caller]
    pub fn from_bytes(runtime: &Arc<Runtime>, bytes: &[u8]) -> Result<Arc<Context>> {
        let site = ledger::location_site(std::panic::Location::caller());
        Self::load(runtime, bytes, None, &site)
    }

    /// [`Context::from_bytes`], entered in the [ledger] with `site`.
    pub fn from_bytes_at(runtime: &Arc<Runtime>, bytes: &[u8], site: &str) -> Result<Arc<Context>> {
        Self::load(runtime, bytes, None, site)
    }

    fn load(
        runtime: &Arc<Runtime>,
        bytes: &[u8],
        source: Option<&Path>,
        site: &str,
    ) -> Result<Arc<Context>> {
        let core = runtime.core()?;
        if bytes.is_empty() {
            return Err(Error::invalid_model("the context binary is empty"));
        }
        let graphs = metadata::read_graphs(&core.system_lib, bytes)?;
        let mut handle: sys::Qnn_ContextHandle_t = std::ptr::null_mut();
        // SAFETY: backend/device are live handles of this library (held by `core`); the binary is
        // valid for `len` bytes during the call (QNN copies what it keeps); `handle` is writable.
        let status = unsafe {
            (core.backend_lib.fns.context_create_from_binary)(
                core.backend,
                core.device,
                std::ptr::null(),
                bytes.as_ptr().cast(),
                bytes.len() as u64,
                &mut handle,
                std::ptr::null_mut(),
            )
        };
        if status != 0 {
            return Err(Error::qnn("contextCreateFromBinary", status));
        }
        if handle.is_null() {
            return Err(Error::invalid_model(
                "contextCreateFromBinary returned a NULL context",
            ));
        }
        let infos: Vec<GraphInfo> = graphs.iter().map(|g| g.info.clone()).collect();
        let loaded_from = match source {
            Some(path) => path.display().to_string(),
            None => format!("<binary {} bytes>", bytes.len()),
        };
        let names: Vec<&str> = infos.iter().map(|g| g.name.as_str()).collect();
        let detail = format!("{loaded_from} (graphs: {})", names.join(", "));
        let core = ContextCore {
            runtime: core,
            handle: RwLock::new(Some(handle)),
            execute_locks: graphs.iter().map(|_| Mutex::new(())).collect(),
            graphs,
            alive: Mutex::new(Alive::new(Kind::Context, site, detail)),
        };
        Ok(Arc::new(Context {
            graphs: infos,
            source: source.map(Path::to_path_buf),
            core: Closable::new("context", core),
        }))
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
    /// Its graphs report `Closed` afterwards. Closing twice is an error.
    pub fn close(&self) -> Result<()> {
        self.core.close()?.free()
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    pub(crate) fn core(&self) -> Result<Arc<ContextCore>> {
        self.core.get()
    }
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
