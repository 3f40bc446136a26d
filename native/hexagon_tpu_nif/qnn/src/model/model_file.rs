//! Reading a context binary from a path without trusting the path: it is opened non-blocking
//! (a FIFO with no writer must not hang the caller), `fstat`ed, and only a regular file within
//! the size limit is read.
//!
//! Files are read, never mapped: a mapped file that is truncated while QNN reads it (an update
//! written in place, a full disk, a network filesystem) raises SIGBUS inside QNN, which takes the
//! whole VM down; a read only comes up short, and says so. Reading costs no more peak memory than
//! a mapping (QNN touches every page of the binary either way), and the bytes are freed as soon
//! as the context is created.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::base::error::{Error, Result};

/// The default largest context binary accepted (the `max_bytes` of [`read`]).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// The most read in one `read` call.
const CHUNK: usize = 4 << 20;

/// What a file that is not a regular file is, in words.
fn not_regular(kind: std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else {
        Some("not a regular file")
    }
}

/// Opens `path`, refuses anything but a regular file of 1 to `max_bytes` bytes before reading a
/// byte, and reads it, in chunks of at most 4 MiB.
pub fn read(path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    let _span = crate::observe::trace::span(
        crate::observe::trace::Phase::ContextRead,
        &path.to_string_lossy(),
    );
    let io = |message: String| Error::Io {
        path: path.to_path_buf(),
        message,
    };
    let mut file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            // Some special files cannot even be opened (a socket: ENXIO); say what it is.
            match std::fs::metadata(path)
                .ok()
                .and_then(|m| not_regular(m.file_type()))
            {
                Some(kind) => io(format!(
                    "is {kind}; a context binary must be a regular file"
                )),
                None => io(e.to_string()),
            }
        })?;
    let metadata = file.metadata().map_err(|e| io(e.to_string()))?;
    if let Some(kind) = not_regular(metadata.file_type()) {
        return Err(io(format!(
            "is {kind}; a context binary must be a regular file"
        )));
    }
    let size = metadata.len();
    if size == 0 {
        return Err(Error::invalid_model(format!("{} is empty", path.display())));
    }
    if size > max_bytes {
        return Err(io(format!(
            "is {size} bytes, more than the {max_bytes} allowed (the max_bytes option)"
        )));
    }
    let len =
        usize::try_from(size).map_err(|_| io(format!("{size} bytes do not fit in memory")))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|_| io(format!("{size} bytes could not be allocated")))?;
    // Exactly the size `fstat` gave: a file that grows meanwhile is cut there, one that shrinks
    // comes up short.
    while bytes.len() < len {
        let want = (len - bytes.len()).min(CHUNK);
        let read = (&mut file)
            .take(want as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| io(e.to_string()))?;
        if read == 0 {
            return Err(io(format!(
                "changed while being read ({} of {size} bytes)",
                bytes.len()
            )));
        }
    }
    Ok(bytes)
}
