//! Caps the user input an error message quotes: paths and graph names the caller gave are shown
//! up to [`LIMIT`] bytes, then `…` (the Elixir side's `HexagonTpu.Args.quote_input/1` does the
//! same for what it echoes). A megabyte-long name never ends up whole in a log.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::Failure;

/// The most bytes of a caller's path or name that a message quotes.
pub const LIMIT: usize = 200;

/// `error` for Elixir, with every path and graph name in it capped at [`LIMIT`] bytes. The
/// `dlerror` text repeats the path it failed on, so that copy is shortened too.
pub fn capped(error: qnn::Error) -> Failure {
    use qnn::Error as E;
    Failure::from(match error {
        E::LibraryNotFound { role, tried } => E::LibraryNotFound {
            role,
            tried: tried
                .into_iter()
                .map(|(path, why)| {
                    let why = shorten_mentions(&why, &path);
                    (cap_path(&path), why)
                })
                .collect(),
        },
        E::MissingSymbol {
            path,
            symbol,
            detail,
        } => E::MissingSymbol {
            detail: shorten_mentions(&detail, &path),
            path: cap_path(&path),
            symbol,
        },
        E::IncompatibleApi {
            path,
            offered,
            required,
        } => E::IncompatibleApi {
            path: cap_path(&path),
            offered,
            required,
        },
        E::MissingEntry { path, entry } => E::MissingEntry {
            path: cap_path(&path),
            entry,
        },
        E::Io { path, message } => E::Io {
            message: shorten_mentions(&message, &path),
            path: cap_path(&path),
        },
        E::GraphNotFound { name, available } => E::GraphNotFound {
            name: cap_str(&name),
            available,
        },
        other => other,
    })
}

/// `s` itself when it is at most [`LIMIT`] bytes, else its first whole characters within the
/// limit and `…`.
pub fn cap_str(s: &str) -> String {
    if s.len() <= LIMIT {
        return s.to_string();
    }
    let mut end = LIMIT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// `path` itself when it is at most [`LIMIT`] bytes, else its first [`LIMIT`] bytes and `…`
/// (a path is bytes: the cut may split a character, which the message shows as U+FFFD).
pub fn cap_path(path: &Path) -> PathBuf {
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() <= LIMIT {
        return path.to_path_buf();
    }
    let mut capped = bytes[..LIMIT].to_vec();
    capped.extend_from_slice("…".as_bytes());
    PathBuf::from(OsStr::from_bytes(&capped))
}

/// `text` with every mention of a long `path` replaced by its capped form.
fn shorten_mentions(text: &str, path: &Path) -> String {
    if path.as_os_str().len() <= LIMIT {
        return text.to_string();
    }
    let shown = path.display().to_string();
    let text = text.replace(&shown, &cap_path(path).display().to_string());
    // Whatever else is long in it (a message that quoted the path some other way) is cut too.
    if text.len() > 4 * LIMIT {
        cap_str(&text)
    } else {
        text
    }
}
