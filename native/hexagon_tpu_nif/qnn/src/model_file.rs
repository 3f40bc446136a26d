//! Reading a context binary from a path without trusting the path: it is opened non-blocking
//! (a FIFO with no writer must not hang the caller), `fstat`ed, and only a regular file within
//! the size limit is read. Large files are mapped, not copied, so a load adds about the file's
//! size to peak memory, not twice that.

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// The default largest context binary accepted (the `max_bytes` of [`read`]).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// Files at least this large are mapped instead of read.
const MAP_FROM: u64 = 1 << 20;

/// A context binary's bytes, read or mapped.
pub enum ModelBytes {
    Read(Vec<u8>),
    Mapped(Mapping),
}

impl ModelBytes {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            ModelBytes::Read(bytes) => bytes,
            ModelBytes::Mapped(mapping) => mapping.as_slice(),
        }
    }
}

/// A read-only private mapping of a whole file.
pub struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone; reading it from any thread is
// sound, and it is unmapped exactly once, in `Drop`.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live mapping of `len` readable bytes until `Drop`.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

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
/// byte, and reads or maps it.
pub fn read(path: &Path, max_bytes: u64) -> Result<ModelBytes> {
    let io = |message: String| Error::Io {
        path: path.to_path_buf(),
        message,
    };
    let file = File::options()
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
    if size < MAP_FROM {
        let mut bytes = Vec::with_capacity(len);
        use std::io::Read;
        // `take` bounds the read even if the file grows after the fstat.
        (&file)
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(|e| io(e.to_string()))?;
        if bytes.len() != len {
            return Err(io(format!(
                "changed while being read ({} of {size} bytes)",
                bytes.len()
            )));
        }
        return Ok(ModelBytes::Read(bytes));
    }
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh read-only private mapping of `len` bytes of an open regular file; the
    // result is checked against MAP_FAILED before use.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io(format!(
            "could not be mapped: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(ModelBytes::Mapped(Mapping { ptr, len }))
}
