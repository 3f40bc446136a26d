//! Context configuration (`QnnContext.h`): the config struct `contextCreateFromBinary` takes a
//! NULL-terminated array of, and the asynchronous-execution queue depth it can carry.

use std::ffi::{c_char, c_void};

/// `Qnn_ErrorReportingConfig_t` (`QnnTypes.h`): a member of the context config union.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Qnn_ErrorReportingConfig_t {
    /// `Qnn_ErrorReportingLevel_t`.
    pub reportingLevel: u32,
    /// KB reserved for error information.
    pub storageLimit: u32,
}

/// `QnnContext_AsyncExecutionQueueDepth_t`: how many executes a context's asynchronous queue
/// holds before `QnnGraph_executeAsync` blocks. C puts `depth` in a one-member anonymous union,
/// held here directly.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QnnContext_AsyncExecutionQueueDepth_t {
    /// `QnnContext_AsyncExecutionQueueDepthType_t`:
    /// [`QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_NUMERIC`](super::QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_NUMERIC).
    pub type_: u32,
    pub depth: u32,
}

/// The anonymous union of `QnnContext_Config_t`; which member is meant follows `option`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union QnnContext_ConfigUnion_t {
    /// `QNN_CONTEXT_CONFIG_OPTION_CUSTOM`: a backend's own config struct.
    pub customConfig: *mut c_void,
    /// `QNN_CONTEXT_CONFIG_OPTION_PRIORITY`: `Qnn_Priority_t`.
    pub priority: u32,
    pub errorConfig: Qnn_ErrorReportingConfig_t,
    pub oemString: *const c_char,
    /// `QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH`.
    pub asyncExeQueueDepth: QnnContext_AsyncExecutionQueueDepth_t,
    /// NULL-terminated list of graph names.
    pub enableGraphs: *const *const c_char,
    pub memoryLimitHint: u64,
    pub isPersistentBinary: u8,
    /// `QnnContext_BinaryCompatibilityType_t`.
    pub binaryCompatibilityType: u32,
    pub isGraphInitDeferred: u8,
    /// NULL-terminated list of graph names.
    pub graphRetentionOrder: *const *const c_char,
}

/// `QnnContext_Config_t`: one context config option. `contextCreateFromBinary` takes a
/// NULL-terminated array of pointers to these (NULL for none).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnContext_Config_t {
    /// `QnnContext_ConfigOption_t`, e.g.
    /// [`QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH`](super::QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH).
    pub option: u32,
    pub value: QnnContext_ConfigUnion_t,
}

impl QnnContext_Config_t {
    /// The option that sets the default priority of the context's graphs
    /// (`QNN_CONTEXT_CONFIG_OPTION_PRIORITY`, a `Qnn_Priority_t`).
    pub const fn priority(priority: u32) -> QnnContext_Config_t {
        QnnContext_Config_t {
            option: super::QNN_CONTEXT_CONFIG_OPTION_PRIORITY,
            value: QnnContext_ConfigUnion_t { priority },
        }
    }

    /// The option that sets the asynchronous execution queue depth of every graph of the
    /// context (`QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH`, numeric).
    pub const fn async_execution_queue_depth(depth: u32) -> QnnContext_Config_t {
        QnnContext_Config_t {
            option: super::QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH,
            value: QnnContext_ConfigUnion_t {
                asyncExeQueueDepth: QnnContext_AsyncExecutionQueueDepth_t {
                    type_: super::QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_NUMERIC,
                    depth,
                },
            },
        }
    }
}
