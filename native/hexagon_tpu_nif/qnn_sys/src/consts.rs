//! Enumerator values (all C enums are `u32`) and error codes.

// Qnn_DataType_t
pub const QNN_DATATYPE_INT_8: u32 = 0x0008;
pub const QNN_DATATYPE_INT_16: u32 = 0x0016;
pub const QNN_DATATYPE_INT_32: u32 = 0x0032;
pub const QNN_DATATYPE_INT_64: u32 = 0x0064;
pub const QNN_DATATYPE_UINT_8: u32 = 0x0108;
pub const QNN_DATATYPE_UINT_16: u32 = 0x0116;
pub const QNN_DATATYPE_UINT_32: u32 = 0x0132;
pub const QNN_DATATYPE_UINT_64: u32 = 0x0164;
pub const QNN_DATATYPE_FLOAT_16: u32 = 0x0216;
pub const QNN_DATATYPE_BFLOAT_16: u32 = 0x0226;
pub const QNN_DATATYPE_FLOAT_32: u32 = 0x0232;
pub const QNN_DATATYPE_FLOAT_64: u32 = 0x0264;
pub const QNN_DATATYPE_SFIXED_POINT_4: u32 = 0x0304;
pub const QNN_DATATYPE_SFIXED_POINT_8: u32 = 0x0308;
pub const QNN_DATATYPE_SFIXED_POINT_16: u32 = 0x0316;
pub const QNN_DATATYPE_SFIXED_POINT_32: u32 = 0x0332;
pub const QNN_DATATYPE_UFIXED_POINT_4: u32 = 0x0404;
pub const QNN_DATATYPE_UFIXED_POINT_8: u32 = 0x0408;
pub const QNN_DATATYPE_UFIXED_POINT_16: u32 = 0x0416;
pub const QNN_DATATYPE_UFIXED_POINT_32: u32 = 0x0432;
pub const QNN_DATATYPE_BOOL_8: u32 = 0x0508;
pub const QNN_DATATYPE_STRING: u32 = 0x0608;
pub const QNN_DATATYPE_UNDEFINED: u32 = 0x7FFF_FFFF;

// Qnn_TensorVersion_t
pub const QNN_TENSOR_VERSION_1: u32 = 1;
pub const QNN_TENSOR_VERSION_2: u32 = 2;

// Qnn_TensorType_t (the ones the runtime distinguishes)
pub const QNN_TENSOR_TYPE_APP_WRITE: u32 = 0;
pub const QNN_TENSOR_TYPE_APP_READ: u32 = 1;
pub const QNN_TENSOR_TYPE_APP_READWRITE: u32 = 2;

// Qnn_TensorDataFormat_t
pub const QNN_TENSOR_DATA_FORMAT_DENSE: u32 = 0;
pub const QNN_TENSOR_DATA_FORMAT_SPARSE: u32 = 1;

// Qnn_TensorMemType_t
pub const QNN_TENSORMEMTYPE_RAW: u32 = 0;
pub const QNN_TENSORMEMTYPE_MEMHANDLE: u32 = 1;

// Qnn_Definition_t
pub const QNN_DEFINITION_IMPL_GENERATED: u32 = 0;
pub const QNN_DEFINITION_DEFINED: u32 = 1;
pub const QNN_DEFINITION_UNDEFINED: u32 = 0x7FFF_FFFF;

// Qnn_QuantizationEncoding_t
pub const QNN_QUANTIZATION_ENCODING_SCALE_OFFSET: u32 = 0;
pub const QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET: u32 = 1;
pub const QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET: u32 = 2;
pub const QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET: u32 = 3;
pub const QNN_QUANTIZATION_ENCODING_BLOCK: u32 = 4;
pub const QNN_QUANTIZATION_ENCODING_BLOCKWISE_EXPANSION: u32 = 5;
pub const QNN_QUANTIZATION_ENCODING_VECTOR: u32 = 6;
pub const QNN_QUANTIZATION_ENCODING_FLOAT_BLOCK: u32 = 7;
pub const QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET_MAPPED: u32 = 8;
pub const QNN_QUANTIZATION_ENCODING_BW_BLOCK_MAPPED: u32 = 9;
pub const QNN_QUANTIZATION_ENCODING_BW_BLOCKWISE_EXPANSION_MAPPED: u32 = 10;
pub const QNN_QUANTIZATION_ENCODING_BW_FLOAT_BLOCK: u32 = 11;
pub const QNN_QUANTIZATION_ENCODING_UNDEFINED: u32 = 0x7FFF_FFFF;

// QnnSystemContext_BinaryInfoVersion_t / GraphInfoVersion_t
pub const QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_1: u32 = 1;
pub const QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_2: u32 = 2;
pub const QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_3: u32 = 3;
pub const QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_1: u32 = 1;
pub const QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_2: u32 = 2;
pub const QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_3: u32 = 3;

// QnnLog_Level_t
pub const QNN_LOG_LEVEL_ERROR: u32 = 1;
pub const QNN_LOG_LEVEL_WARN: u32 = 2;
pub const QNN_LOG_LEVEL_INFO: u32 = 3;
pub const QNN_LOG_LEVEL_VERBOSE: u32 = 4;
pub const QNN_LOG_LEVEL_DEBUG: u32 = 5;

// Backend ids
pub const QNN_BACKEND_ID_NULL: u32 = 0;
pub const QNN_BACKEND_ID_HTP: u32 = 6;

// QnnContext_ConfigOption_t
pub const QNN_CONTEXT_CONFIG_OPTION_CUSTOM: u32 = 0;
pub const QNN_CONTEXT_CONFIG_OPTION_PRIORITY: u32 = 1;

// Qnn_Priority_t
pub const QNN_PRIORITY_LOW: u32 = 0;
pub const QNN_PRIORITY_NORMAL: u32 = 100;
pub const QNN_PRIORITY_NORMAL_HIGH: u32 = 150;
pub const QNN_PRIORITY_HIGH: u32 = 200;
pub const QNN_CONTEXT_CONFIG_OPTION_ERROR_REPORTING: u32 = 2;
pub const QNN_CONTEXT_CONFIG_OPTION_OEM_STRING: u32 = 3;
/// The depth of the context's asynchronous execution queue (`QnnGraph_executeAsync`), set only
/// at context creation. The HTP's documented maximum is 300.
pub const QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH: u32 = 4;
pub const QNN_CONTEXT_CONFIG_ENABLE_GRAPHS: u32 = 5;
pub const QNN_CONTEXT_CONFIG_MEMORY_LIMIT_HINT: u32 = 6;
pub const QNN_CONTEXT_CONFIG_PERSISTENT_BINARY: u32 = 7;
pub const QNN_CONTEXT_CONFIG_BINARY_COMPATIBILITY: u32 = 8;
pub const QNN_CONTEXT_CONFIG_OPTION_DEFER_GRAPH_INIT: u32 = 9;
pub const QNN_CONTEXT_CONFIG_GRAPH_RETENTION_ORDER: u32 = 10;
pub const QNN_CONTEXT_CONFIG_UNDEFINED: u32 = 0x7FFF_FFFF;

// QnnContext_AsyncExecutionQueueDepthType_t (its UNDEFINED has seven Fs in the header)
pub const QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_NUMERIC: u32 = 0;
pub const QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_UNDEFINED: u32 = 0x7FF_FFFF;

// QnnProperty.h: capability keys for `propertyHasCapability` (0 = supported, 1000 = not)
pub const QNN_PROPERTY_GROUP_CORE: u32 = 1;
pub const QNN_PROPERTY_GROUP_GRAPH: u32 = QNN_PROPERTY_GROUP_CORE + 300;
/// Whether the backend supports `QnnGraph_executeAsync`.
pub const QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION: u32 = QNN_PROPERTY_GROUP_GRAPH + 3;
/// Whether the backend supports a signal on `QnnGraph_executeAsync`.
pub const QNN_PROPERTY_GRAPH_SUPPORT_EXECUTE_ASYNC_SIGNAL: u32 = QNN_PROPERTY_GROUP_GRAPH + 8;

// Error codes (values of `error_code(handle)`), as the QAIRT 2.43 headers define them.
//
// QNN gives each API family a range (QnnCommon.h): common 1000, property 2000, op package 3000,
// backend 4000 (Saver 4950–4998), context 5000, graph 6000, tensor 7000, mem 8000, signal 9000,
// error 10000, log 11000, profile 12000, perf infrastructure 13000, device 14000, global config
// 15000, System 30000–49999. Every family also returns some common codes under names of its own
// (`QNN_CONTEXT_ERROR_MEM_ALLOC = QNN_COMMON_ERROR_MEM_ALLOC`); those are the aliases below.

/// Declares each code as a `pub const` and lists it in [`ERROR_CODES`].
macro_rules! error_codes {
    ($($name:ident = $code:literal,)*) => {
        $(pub const $name: u32 = $code;)*

        /// Every error code the QAIRT 2.43 headers define for the core API (QnnCommon.h,
        /// QnnProperty.h, QnnOpPackage.h, QnnBackend.h, QnnSaver.h, QnnContext.h, QnnGraph.h,
        /// QnnTensor.h, QnnMem.h, QnnSignal.h, QnnError.h, QnnLog.h, QnnProfile.h, QnnDevice.h,
        /// QnnGlobalConfig.h), the System API (System/QnnSystem*.h) and the HTP backend
        /// (HTP/QnnHtpPerfInfrastructure.h), with one name per code, in ascending order. A code
        /// the headers give several names has the others in [`ERROR_ALIASES`]. The DSP and HTA
        /// backends number their perf-infrastructure errors 13000–13005 differently from the
        /// HTP; this crate drives the HTP, so the table has the HTP's.
        pub const ERROR_CODES: &[(u32, &str)] = &[$(($code, stringify!($name))),*];
    };
}

/// Declares each alias as a `pub const` equal to its target and lists it in [`ERROR_ALIASES`].
macro_rules! error_aliases {
    ($($name:ident = $target:ident,)*) => {
        $(pub const $name: u32 = $target;)*

        /// Header names that share a code with an entry of [`ERROR_CODES`]: a family's name for
        /// a common code, and the System families that number their errors alike (System
        /// context, DLC and tensor all put their own error at 30002, context and DLC their
        /// malformed-binary error at 30010). [`error_name`] reports the entry of
        /// [`ERROR_CODES`], which for the System codes is the System context's (the family
        /// this crate calls).
        pub const ERROR_ALIASES: &[(&str, u32)] = &[$((stringify!($name), $target)),*];
    };
}

error_codes! {
    QNN_SUCCESS = 0,
    // QnnCommon.h
    QNN_COMMON_ERROR_NOT_SUPPORTED = 1000,
    QNN_COMMON_ERROR_MEM_ALLOC = 1002,
    QNN_COMMON_ERROR_SYSTEM = 1003,
    QNN_COMMON_ERROR_INVALID_ARGUMENT = 1004,
    QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED = 1005,
    QNN_COMMON_ERROR_PLATFORM_NOT_SUPPORTED = 1006,
    QNN_COMMON_ERROR_SYSTEM_COMMUNICATION = 1007,
    QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES = 1008,
    QNN_COMMON_ERROR_LOADING_BINARIES = 1009,
    QNN_COMMON_ERROR_RESOURCE_UNAVAILABLE = 1010,
    QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL = 1011,
    QNN_COMMON_ERROR_GENERAL = 1100,
    // QnnProperty.h
    QNN_PROPERTY_ERROR_UNKNOWN_KEY = 2000,
    // QnnOpPackage.h
    QNN_OP_PACKAGE_ERROR_LIBRARY_ALREADY_INITIALIZED = 3000,
    QNN_OP_PACKAGE_ERROR_LIBRARY_NOT_INITIALIZED = 3001,
    QNN_OP_PACKAGE_ERROR_INVALID_HANDLE = 3002,
    QNN_OP_PACKAGE_ERROR_INVALID_INFRASTRUCTURE = 3100,
    QNN_OP_PACKAGE_ERROR_INVALID_INFO = 3101,
    QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE = 3110,
    QNN_OP_PACKAGE_ERROR_INVALID_ARGUMENT = 3200,
    // QnnBackend.h
    QNN_BACKEND_ERROR_CANNOT_INITIALIZE = 4000,
    QNN_BACKEND_ERROR_TERMINATE_FAILED = 4002,
    QNN_BACKEND_ERROR_NOT_SUPPORTED = 4003,
    QNN_BACKEND_ERROR_INVALID_ARGUMENT = 4004,
    QNN_BACKEND_ERROR_OP_PACKAGE_NOT_FOUND = 4005,
    QNN_BACKEND_ERROR_OP_PACKAGE_IF_PROVIDER_NOT_FOUND = 4006,
    QNN_BACKEND_ERROR_OP_PACKAGE_REGISTRATION_FAILED = 4007,
    QNN_BACKEND_ERROR_OP_PACKAGE_UNSUPPORTED_VERSION = 4008,
    QNN_BACKEND_ERROR_OP_PACKAGE_DUPLICATE = 4009,
    QNN_BACKEND_ERROR_INCONSISTENT_CONFIG = 4010,
    QNN_BACKEND_ERROR_INVALID_HANDLE = 4011,
    QNN_BACKEND_ERROR_INVALID_CONFIG = 4012,
    // Saver/QnnSaver.h
    QNN_SAVER_ERROR_DUMMY_RETVALUE = 4950,
    QNN_SAVER_ERROR_ALREADY_INSTANTIATED = 4951,
    // QnnContext.h
    QNN_CONTEXT_ERROR_INVALID_ARGUMENT = 5000,
    QNN_CONTEXT_ERROR_CTX_DOES_NOT_EXIST = 5001,
    QNN_CONTEXT_ERROR_INVALID_HANDLE = 5002,
    QNN_CONTEXT_ERROR_NOT_FINALIZED = 5003,
    QNN_CONTEXT_ERROR_BINARY_VERSION = 5004,
    QNN_CONTEXT_ERROR_CREATE_FROM_BINARY = 5005,
    QNN_CONTEXT_ERROR_GET_BINARY_SIZE_FAILED = 5006,
    QNN_CONTEXT_ERROR_GET_BINARY_FAILED = 5007,
    QNN_CONTEXT_ERROR_BINARY_CONFIGURATION = 5008,
    QNN_CONTEXT_ERROR_SET_PROFILE = 5009,
    QNN_CONTEXT_ERROR_INVALID_CONFIG = 5010,
    QNN_CONTEXT_ERROR_BINARY_SUBOPTIMAL = 5011,
    QNN_CONTEXT_ERROR_ABORTED = 5012,
    QNN_CONTEXT_ERROR_TIMED_OUT = 5013,
    QNN_CONTEXT_ERROR_INCREMENT_INVALID_BUFFER = 5014,
    // QnnGraph.h
    QNN_GRAPH_ERROR_INVALID_ARGUMENT = 6000,
    QNN_GRAPH_ERROR_INVALID_HANDLE = 6001,
    QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST = 6002,
    QNN_GRAPH_ERROR_INVALID_NAME = 6003,
    QNN_GRAPH_ERROR_INVALID_TENSOR = 6004,
    QNN_GRAPH_ERROR_INVALID_OP_CONFIG = 6005,
    QNN_GRAPH_ERROR_SET_PROFILE = 6006,
    QNN_GRAPH_ERROR_UNCONNECTED_NODE = 6007,
    QNN_GRAPH_ERROR_CREATE_FAILED = 6020,
    QNN_GRAPH_ERROR_OPTIMIZATION_FAILED = 6021,
    QNN_GRAPH_ERROR_FINALIZE_FAILED = 6022,
    QNN_GRAPH_ERROR_GRAPH_NOT_FINALIZED = 6023,
    QNN_GRAPH_ERROR_GRAPH_FINALIZED = 6024,
    QNN_GRAPH_ERROR_EXECUTION_ASYNC_FIFO_FULL = 6025,
    QNN_GRAPH_ERROR_SIGNAL_IN_USE = 6030,
    QNN_GRAPH_ERROR_ABORTED = 6031,
    QNN_GRAPH_ERROR_PROFILE_IN_USE = 6032,
    QNN_GRAPH_ERROR_TIMED_OUT = 6033,
    QNN_GRAPH_ERROR_SUBGRAPH = 6034,
    QNN_GRAPH_ERROR_DISABLED = 6035,
    QNN_GRAPH_ERROR_DYNAMIC_TENSOR_SHAPE = 6036,
    QNN_GRAPH_ERROR_TENSOR_SPARSITY = 6037,
    QNN_GRAPH_ERROR_EARLY_TERMINATION = 6038,
    QNN_GRAPH_ERROR_INVALID_CONTEXT = 6039,
    // QnnTensor.h
    QNN_TENSOR_ERROR_INVALID_HANDLE = 7001,
    QNN_TENSOR_ERROR_DOES_NOT_EXIST = 7002,
    QNN_TENSOR_ERROR_ALREADY_EXISTS = 7003,
    QNN_TENSOR_ERROR_INVALID_TENSOR_PARAM = 7004,
    QNN_TENSOR_ERROR_UNSUPPORTED_TENSOR_PARAM = 7005,
    QNN_TENSOR_ERROR_NAME_HASH_COLLISION = 7006,
    QNN_TENSOR_ERROR_INCOMPATIBLE_TENSOR_UPDATE = 7007,
    // QnnMem.h
    QNN_MEM_ERROR_INVALID_ARGUMENT = 8000,
    QNN_MEM_ERROR_INVALID_HANDLE = 8001,
    QNN_MEM_ERROR_ALREADY_REGISTERED = 8002,
    QNN_MEM_ERROR_MAPPING = 8003,
    QNN_MEM_ERROR_INVALID_SHAPE = 8004,
    QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE = 8005,
    // QnnSignal.h
    QNN_SIGNAL_ERROR_SIGNAL_IN_USE = 9000,
    QNN_SIGNAL_ERROR_SIGNAL_IDLE = 9001,
    QNN_SIGNAL_ERROR_INVALID_ARGUMENT = 9002,
    QNN_SIGNAL_ERROR_INVALID_HANDLE = 9003,
    QNN_SIGNAL_ERROR_TIMEOUT = 9004,
    QNN_SIGNAL_ERROR_INCOMPATIBLE_SIGNAL_TYPE = 9005,
    // QnnError.h
    QNN_ERROR_INVALID_ARGUMENT = 10000,
    QNN_ERROR_INVALID_ERROR_HANDLE = 10001,
    // QnnLog.h
    QNN_LOG_ERROR_INITIALIZATION = 11002,
    QNN_LOG_ERROR_INVALID_ARGUMENT = 11003,
    QNN_LOG_ERROR_INVALID_HANDLE = 11004,
    // QnnProfile.h
    QNN_PROFILE_ERROR_INVALID_HANDLE = 12000,
    QNN_PROFILE_ERROR_HANDLE_IN_USE = 12001,
    QNN_PROFILE_ERROR_INCOMPATIBLE_EVENT = 12002,
    // HTP/QnnHtpPerfInfrastructure.h
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_HANDLE_PTR = 13000,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT = 13001,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED_CONFIG = 13002,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT = 13003,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED = 13004,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_MEM_ALLOC = 13005,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_FAILED = 13006,
    // QnnDevice.h
    QNN_DEVICE_ERROR_INVALID_HANDLE = 14000,
    QNN_DEVICE_ERROR_INVALID_CONFIG = 14001,
    QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE = 14002,
    QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT = 14003,
    // QnnGlobalConfig.h
    QNN_GLOBAL_CONFIG_ERROR_INVALID_CONFIG = 15000,
    // System/QnnSystemCommon.h, System/QnnSystemContext.h, System/QnnSystemProfile.h
    QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE = 30000,
    QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT = 30001,
    QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED = 30002,
    QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY = 30010,
    QNN_SYSTEM_PROFILE_ERROR_MEM_ALLOC = 31000,
}

error_aliases! {
    // QnnBackend.h
    QNN_BACKEND_ERROR_MEM_ALLOC = QNN_COMMON_ERROR_MEM_ALLOC,
    QNN_BACKEND_ERROR_UNSUPPORTED_PLATFORM = QNN_COMMON_ERROR_PLATFORM_NOT_SUPPORTED,
    // QnnContext.h
    QNN_CONTEXT_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_CONTEXT_ERROR_MEM_ALLOC = QNN_COMMON_ERROR_MEM_ALLOC,
    // QnnGraph.h
    QNN_GRAPH_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_GRAPH_ERROR_MEM_ALLOC = QNN_COMMON_ERROR_MEM_ALLOC,
    QNN_GRAPH_ERROR_GENERAL = QNN_COMMON_ERROR_GENERAL,
    // QnnTensor.h
    QNN_TENSOR_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    // QnnDevice.h
    QNN_DEVICE_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_DEVICE_ERROR_MEM_ALLOC = QNN_COMMON_ERROR_MEM_ALLOC,
    QNN_DEVICE_ERROR_INVALID_ARGUMENT = QNN_COMMON_ERROR_INVALID_ARGUMENT,
    // QnnLog.h
    QNN_LOG_ERROR_MEM_ALLOC = QNN_COMMON_ERROR_MEM_ALLOC,
    // QnnProfile.h
    QNN_PROFILE_ERROR_UNSUPPORTED = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_PROFILE_ERROR_INVALID_ARGUMENT = QNN_COMMON_ERROR_INVALID_ARGUMENT,
    QNN_PROFILE_ERROR_MEM_ALLOC = QNN_COMMON_ERROR_MEM_ALLOC,
    // QnnMem.h
    QNN_MEM_ERROR_NOT_SUPPORTED = QNN_COMMON_ERROR_NOT_SUPPORTED,
    // QnnOpPackage.h
    QNN_OP_PACKAGE_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_OP_PACKAGE_ERROR_GENERAL = QNN_COMMON_ERROR_GENERAL,
    // QnnSignal.h
    QNN_SIGNAL_ERROR_UNSUPPORTED = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_SIGNAL_ERROR_MEM_ALLOC = QNN_COMMON_ERROR_MEM_ALLOC,
    // QnnInterface.h
    QNN_INTERFACE_ERROR_NOT_SUPPORTED = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_INTERFACE_ERROR_INVALID_PARAMETER = QNN_COMMON_ERROR_INVALID_ARGUMENT,
    // System/QnnSystemInterface.h
    QNN_SYSTEM_INTERFACE_ERROR_NOT_SUPPORTED = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_SYSTEM_INTERFACE_ERROR_INVALID_PARAMETER = QNN_COMMON_ERROR_INVALID_ARGUMENT,
    // System/QnnSystemCommon.h
    QNN_SYSTEM_COMMON_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    // System/QnnSystemContext.h
    QNN_SYSTEM_CONTEXT_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_SYSTEM_CONTEXT_ERROR_INVALID_HANDLE = QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE,
    QNN_SYSTEM_CONTEXT_ERROR_INVALID_ARGUMENT = QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT,
    // System/QnnSystemDlc.h (its own errors are numbered like the System context's)
    QNN_SYSTEM_DLC_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_SYSTEM_DLC_ERROR_INVALID_HANDLE = QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE,
    QNN_SYSTEM_DLC_ERROR_INVALID_ARGUMENT = QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT,
    QNN_SYSTEM_DLC_ERROR_OPERATION_FAILED = QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED,
    QNN_SYSTEM_DLC_ERROR_MALFORMED_BINARY = QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY,
    // System/QnnSystemProfile.h
    QNN_SYSTEM_PROFILE_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_SYSTEM_PROFILE_ERROR_INVALID_HANDLE = QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE,
    QNN_SYSTEM_PROFILE_ERROR_INVALID_ARGUMENT = QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT,
    // System/QnnSystemTensor.h (its own error is numbered like the System context's)
    QNN_SYSTEM_TENSOR_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
    QNN_SYSTEM_TENSOR_ERROR_INVALID_ARGUMENT = QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT,
    QNN_SYSTEM_TENSOR_ERROR_INVALID_TENSOR = QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED,
}

/// The header name of an error code (the [`ERROR_CODES`] entry), or `"QNN_UNKNOWN_ERROR"`.
pub const fn error_name(code: u32) -> &'static str {
    // Binary search: ERROR_CODES is in ascending order (checked by a test).
    let (mut lo, mut hi) = (0, ERROR_CODES.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (c, name) = ERROR_CODES[mid];
        if c == code {
            return name;
        }
        if c < code {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    "QNN_UNKNOWN_ERROR"
}

/// The code of a header name, primary or alias (`"QNN_CONTEXT_ERROR_MEM_ALLOC"` is 1002).
pub fn error_code_by_name(name: &str) -> Option<u32> {
    ERROR_CODES
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(c, _)| *c)
        .or_else(|| {
            ERROR_ALIASES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, c)| *c)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The family ranges of QnnCommon.h (and QnnSystemCommon.h), by name prefix; the most
    /// specific prefix first.
    const RANGES: &[(&str, u32, u32)] = &[
        ("QNN_COMMON_", 1000, 1999),
        ("QNN_PROPERTY_", 2000, 2999),
        ("QNN_OP_PACKAGE_", 3000, 3999),
        ("QNN_BACKEND_", 4000, 4999),
        ("QNN_SAVER_", 4950, 4998),
        ("QNN_CONTEXT_", 5000, 5999),
        ("QNN_GRAPH_", 6000, 6999),
        ("QNN_TENSOR_", 7000, 7999),
        ("QNN_MEM_", 8000, 8999),
        ("QNN_SIGNAL_", 9000, 9999),
        ("QNN_ERROR_", 10000, 10999),
        ("QNN_LOG_", 11000, 11999),
        ("QNN_PROFILE_", 12000, 12999),
        ("QNN_HTP_PERF_INFRASTRUCTURE_", 13000, 13999),
        ("QNN_DEVICE_", 14000, 14999),
        ("QNN_GLOBAL_CONFIG_", 15000, 15999),
        ("QNN_SYSTEM_PROFILE_", 31000, 31999),
        ("QNN_SYSTEM_", 30000, 30999),
    ];

    #[test]
    fn codes_have_their_header_names() {
        for (code, name) in [
            (0, "QNN_SUCCESS"),
            (1002, "QNN_COMMON_ERROR_MEM_ALLOC"),
            (1100, "QNN_COMMON_ERROR_GENERAL"),
            (3110, "QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE"),
            (4000, "QNN_BACKEND_ERROR_CANNOT_INITIALIZE"),
            (4012, "QNN_BACKEND_ERROR_INVALID_CONFIG"),
            (5001, "QNN_CONTEXT_ERROR_CTX_DOES_NOT_EXIST"),
            (5003, "QNN_CONTEXT_ERROR_NOT_FINALIZED"),
            (5005, "QNN_CONTEXT_ERROR_CREATE_FROM_BINARY"),
            (5006, "QNN_CONTEXT_ERROR_GET_BINARY_SIZE_FAILED"),
            (5007, "QNN_CONTEXT_ERROR_GET_BINARY_FAILED"),
            (5009, "QNN_CONTEXT_ERROR_SET_PROFILE"),
            (5010, "QNN_CONTEXT_ERROR_INVALID_CONFIG"),
            (5014, "QNN_CONTEXT_ERROR_INCREMENT_INVALID_BUFFER"),
            (6020, "QNN_GRAPH_ERROR_CREATE_FAILED"),
            (6037, "QNN_GRAPH_ERROR_TENSOR_SPARSITY"),
            (7007, "QNN_TENSOR_ERROR_INCOMPATIBLE_TENSOR_UPDATE"),
            (8005, "QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE"),
            (9004, "QNN_SIGNAL_ERROR_TIMEOUT"),
            (10001, "QNN_ERROR_INVALID_ERROR_HANDLE"),
            (11002, "QNN_LOG_ERROR_INITIALIZATION"),
            (12001, "QNN_PROFILE_ERROR_HANDLE_IN_USE"),
            (13003, "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT"),
            (14002, "QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE"),
            (14003, "QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT"),
            (15000, "QNN_GLOBAL_CONFIG_ERROR_INVALID_CONFIG"),
            (30002, "QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED"),
            (30010, "QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY"),
            (31000, "QNN_SYSTEM_PROFILE_ERROR_MEM_ALLOC"),
        ] {
            assert_eq!(error_name(code), name, "code {code}");
            assert_eq!(error_code_by_name(name), Some(code), "{name}");
        }
        for unknown in [
            1, 999, 1001, 4001, 5015, 6008, 7000, 11000, 29999, 30003, 65535,
        ] {
            assert_eq!(error_name(unknown), "QNN_UNKNOWN_ERROR", "code {unknown}");
        }
        assert_eq!(error_code_by_name("QNN_UNKNOWN_ERROR"), None);
    }

    #[test]
    fn one_name_per_code_in_ascending_order() {
        for pair in ERROR_CODES.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "{} ({}) and {} ({}) are out of order or share a code",
                pair[0].1,
                pair[0].0,
                pair[1].1,
                pair[1].0
            );
        }
        // Every code is found by the search, under its own name.
        for (code, name) in ERROR_CODES {
            assert_eq!(error_name(*code), *name);
        }
    }

    #[test]
    fn every_code_lies_in_its_familys_range() {
        for (code, name) in ERROR_CODES.iter().skip(1) {
            let (prefix, lo, hi) = RANGES
                .iter()
                .find(|(prefix, _, _)| name.starts_with(prefix))
                .unwrap_or_else(|| panic!("{name} belongs to no family"));
            assert!(
                (lo..=hi).contains(&code),
                "{name} = {code} is outside the {prefix}* range {lo}..={hi}"
            );
        }
    }

    #[test]
    fn aliases_name_a_listed_code_and_nothing_twice() {
        let mut names: Vec<&str> = ERROR_CODES.iter().map(|(_, n)| *n).collect();
        for (alias, code) in ERROR_ALIASES {
            assert_ne!(
                error_name(*code),
                "QNN_UNKNOWN_ERROR",
                "{alias} = {code} aliases no listed code"
            );
            // An alias shares a code because it is a common code (1000..=1999) or one numbered
            // alike by the System families; nothing else may collide.
            assert!(
                (1000..=1999).contains(code) || (30000..=30999).contains(code),
                "{alias} = {code} shares a code outside the common and System ranges"
            );
            names.push(alias);
        }
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a name is listed twice");
    }
}
