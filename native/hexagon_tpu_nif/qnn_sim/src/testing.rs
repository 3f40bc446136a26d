//! Test support: find the built `libqnn_sim.so` and make private copies of it.
//!
//! The library keeps process-wide state (knobs, handle registry, counters). glibc loads a
//! path it has already loaded (same inode) only once, so tests that want their own counters
//! and knobs load a [`fresh_library`]: a *copy* (new inode) of the cdylib.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Environment variable that overrides where the library is looked for.
pub const LIB_ENV: &str = "QNN_SIM_LIB";

/// File name of the cdylib on this platform (`libqnn_sim.so` on Linux).
pub fn library_file_name() -> String {
    format!(
        "{}qnn_sim{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

/// Path of the built qnn_sim cdylib.
///
/// Order: `$QNN_SIM_LIB` (a file), then next to the running test executable
/// (`target/[<triple>/]<profile>/deps/`), then its parent (`target/[<triple>/]<profile>/`).
///
/// # Panics
/// If none exists; the message says to run `cargo build -p qnn_sim`.
pub fn cdylib_path() -> PathBuf {
    try_cdylib_path().unwrap_or_else(|tried| {
        panic!(
            "qnn_sim cdylib not found (tried: {}). Run `cargo build -p qnn_sim` (with the same \
             --target/--profile as the tests) or set {LIB_ENV} to the library's path.",
            tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Like [`cdylib_path`], returning the candidates tried on failure.
pub fn try_cdylib_path() -> Result<PathBuf, Vec<PathBuf>> {
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os(LIB_ENV) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p);
    }
    let name = library_file_name();
    if let Ok(exe) = std::env::current_exe() {
        let mut dir = exe.parent().map(Path::to_path_buf);
        for _ in 0..2 {
            let Some(d) = dir else { break };
            let candidate = d.join(&name);
            if candidate.is_file() {
                return Ok(candidate);
            }
            tried.push(candidate);
            dir = d.parent().map(Path::to_path_buf);
        }
    }
    Err(tried)
}

/// Directory holding this process's library copies.
fn copies_dir() -> PathBuf {
    std::env::temp_dir().join(format!("qnn_sim-copies-{}", std::process::id()))
}

/// Removes copy directories left by processes that no longer exist (best effort).
fn sweep_stale_copies() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("qnn_sim-copies-"))
        else {
            continue;
        };
        if let Ok(pid) = pid.parse::<u32>()
            && pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Copies the cdylib to a new unique path and returns it: loading that path gives a separate
/// library instance with its own knobs, handles and counters.
///
/// Copies live in `$TMPDIR/qnn_sim-copies-<pid>/`; directories of dead processes are removed
/// on the first call of a later process.
///
/// # Panics
/// If the library is missing (see [`cdylib_path`]) or the copy fails.
pub fn fresh_library() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    if n == 0 {
        sweep_stale_copies();
    }
    let src = cdylib_path();
    let dir = copies_dir();
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dst = dir.join(format!("{n}-{nanos}-{}", library_file_name()));
    std::fs::copy(&src, &dst)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", src.display(), dst.display()));
    dst
}
