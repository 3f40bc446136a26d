//! The crate's error type: every failure names what was wrong.

use std::fmt;
use std::path::PathBuf;

use crate::base::version::Version;
use crate::sys;

/// Which QNN library a loader error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LibraryRole {
    /// The backend library (`libQnnHtp.so`, or qnn_sim's `libqnn_sim.so`).
    Backend,
    /// `libQnnSystem.so`, which reads context-binary metadata.
    System,
}

impl fmt::Display for LibraryRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LibraryRole::Backend => "backend",
            LibraryRole::System => "system",
        })
    }
}

/// Everything that can go wrong between the caller and QNN.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("could not open the QNN {role} library; tried {}", format_tried(.tried))]
    LibraryNotFound {
        role: LibraryRole,
        tried: Vec<(PathBuf, String)>,
    },
    #[error("{} does not export {symbol}: {detail}", .path.display())]
    MissingSymbol {
        path: PathBuf,
        symbol: &'static str,
        detail: String,
    },
    #[error("{} offers no usable provider: offered {}, required {required}", .path.display(), format_versions(.offered))]
    IncompatibleApi {
        path: PathBuf,
        offered: Vec<Version>,
        required: String,
    },
    #[error("{} does not implement {entry}", .path.display())]
    MissingEntry { path: PathBuf, entry: &'static str },
    #[error("{op} failed with {name} ({code}){}", .detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Qnn {
        op: &'static str,
        code: u32,
        name: &'static str,
        detail: Option<String>,
    },
    #[error("the {what} is closed")]
    Closed { what: &'static str },
    #[error("invalid model metadata: {message}")]
    InvalidModel { message: String },
    #[error("{}: {message}", .path.display())]
    Io { path: PathBuf, message: String },
    #[error("graph {name:?} does not exist; the context has {}", format_names(.available))]
    GraphNotFound {
        name: String,
        available: Vec<String>,
    },
    #[error("{message}")]
    InvalidInput { message: String },
    #[error("internal error in hexagon_tpu (please report it): {message}")]
    Internal { message: String },
    #[error("the process is exiting: QNN is not called any more")]
    Exiting,
    /// The graph's queue of waiting executes is at its limit.
    #[error(
        "graph {graph:?} has {waiting} executes waiting, its limit (max_queued: {limit}); \
         try again later, or raise the limit"
    )]
    Overloaded {
        graph: String,
        waiting: usize,
        limit: usize,
    },
    /// The device was reset (a DSP subsystem restart: QNN answered
    /// `QNN_COMMON_ERROR_SYSTEM_COMMUNICATION`, or its fatal variant) and the execute could not
    /// be brought through it: `detail` says why.
    #[error("graph {graph:?}: the device was reset ({name}, {code}); {detail}", name = sys::error_name(*.code))]
    DeviceReset {
        graph: String,
        code: u32,
        detail: String,
    },
    /// Shared buffers were asked for (`shared_buffers: true`) and cannot be had: `why` says
    /// what failed (rpcmem's library, the backend's QnnMem, an allocation or a registration).
    #[error("shared buffers are not available: {why}")]
    SharedBuffersUnavailable { why: String },
    /// The pre-flight verdict refused the binary before QNN was asked (`qnn::preflight`).
    #[error("{message}")]
    Preflight {
        reason: crate::base::preflight_rules::Reason,
        message: String,
    },
}

impl From<crate::base::preflight_rules::Finding> for Error {
    fn from(finding: crate::base::preflight_rules::Finding) -> Self {
        Error::Preflight {
            reason: finding.reason,
            message: finding.message,
        }
    }
}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A stable, machine-readable reason (the atom the NIF reports).
    pub fn reason(&self) -> &'static str {
        match self {
            Error::LibraryNotFound { .. } => "library_not_found",
            Error::MissingSymbol { .. } => "missing_symbol",
            Error::IncompatibleApi { .. } => "incompatible_api",
            Error::MissingEntry { .. } => "missing_entry",
            Error::Qnn { .. } => "qnn_error",
            Error::Closed { .. } => "closed",
            Error::InvalidModel { .. } => "invalid_model",
            Error::Io { .. } => "io",
            Error::GraphNotFound { .. } => "graph_not_found",
            Error::InvalidInput { .. } => "invalid_input",
            Error::Internal { .. } => "internal",
            Error::Exiting => "exiting",
            Error::Overloaded { .. } => "overloaded",
            Error::DeviceReset { .. } => "device_reset",
            Error::SharedBuffersUnavailable { .. } => "shared_buffers_unavailable",
            Error::Preflight { reason, .. } => reason.as_str(),
        }
    }

    /// The QNN error code (low 16 bits of the handle), when QNN reported the failure.
    pub fn qnn_code(&self) -> Option<u32> {
        match self {
            Error::Qnn { code, .. } | Error::DeviceReset { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether QNN answered a device reset (a DSP subsystem restart):
    /// `QNN_COMMON_ERROR_SYSTEM_COMMUNICATION` or its fatal variant.
    pub(crate) fn is_device_reset(&self) -> bool {
        matches!(
            self,
            Error::Qnn {
                code: sys::QNN_COMMON_ERROR_SYSTEM_COMMUNICATION
                    | sys::QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL,
                ..
            }
        )
    }

    /// This error as graph `name`'s (a [`Error::DeviceReset`] learnt from its context names
    /// no graph yet).
    pub(crate) fn in_graph(self, name: &str) -> Self {
        match self {
            Error::DeviceReset {
                graph,
                code,
                detail,
            } if graph.is_empty() => Error::DeviceReset {
                graph: name.to_string(),
                code,
                detail,
            },
            other => other,
        }
    }

    pub(crate) fn qnn(op: &'static str, handle: sys::Qnn_ErrorHandle_t) -> Self {
        let code = sys::error_code(handle);
        Error::Qnn {
            op,
            code,
            name: sys::error_name(code),
            detail: None,
        }
    }

    pub(crate) fn invalid_model(message: impl Into<String>) -> Self {
        Error::InvalidModel {
            message: message.into(),
        }
    }

    pub(crate) fn invalid_input(message: impl Into<String>) -> Self {
        Error::InvalidInput {
            message: message.into(),
        }
    }
}

fn format_tried(tried: &[(PathBuf, String)]) -> String {
    if tried.is_empty() {
        return "no paths".to_string();
    }
    tried
        .iter()
        .map(|(path, why)| format!("{} ({why})", path.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn format_versions(versions: &[Version]) -> String {
    if versions.is_empty() {
        return "no providers".to_string();
    }
    versions
        .iter()
        .map(Version::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn format_names(names: &[String]) -> String {
    if names.is_empty() {
        return "no graphs".to_string();
    }
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
