//! Provider structs and function tables returned by the two `getProviders` entry points.

use std::ffi::{c_char, c_void};

use super::*;

/// `QnnInterface_getProviders`, the only symbol resolved in a backend library.
pub type QnnInterfaceGetProvidersFn = unsafe extern "C" fn(
    provider_list: *mut *const *const QnnInterface_t,
    num_providers: *mut u32,
) -> Qnn_ErrorHandle_t;

/// `QnnSystemInterface_getProviders`, the only symbol resolved in `libQnnSystem.so`.
pub type QnnSystemInterfaceGetProvidersFn = unsafe extern "C" fn(
    provider_list: *mut *const *const QnnSystemInterface_t,
    num_providers: *mut u32,
) -> Qnn_ErrorHandle_t;

pub type QnnProperty_HasCapabilityFn = unsafe extern "C" fn(key: u32) -> Qnn_ErrorHandle_t;
pub type QnnLog_CreateFn = unsafe extern "C" fn(
    callback: *const c_void,
    max_level: u32,
    out: *mut Qnn_LogHandle_t,
) -> Qnn_ErrorHandle_t;
pub type QnnLog_SetLogLevelFn =
    unsafe extern "C" fn(log: Qnn_LogHandle_t, level: u32) -> Qnn_ErrorHandle_t;
pub type QnnLog_FreeFn = unsafe extern "C" fn(log: Qnn_LogHandle_t) -> Qnn_ErrorHandle_t;
pub type QnnBackend_CreateFn = unsafe extern "C" fn(
    log: Qnn_LogHandle_t,
    config: *const *const c_void,
    out: *mut Qnn_BackendHandle_t,
) -> Qnn_ErrorHandle_t;
pub type QnnBackend_GetApiVersionFn =
    unsafe extern "C" fn(out: *mut Qnn_ApiVersion_t) -> Qnn_ErrorHandle_t;
pub type QnnBackend_GetBuildIdFn =
    unsafe extern "C" fn(out: *mut *const c_char) -> Qnn_ErrorHandle_t;
pub type QnnBackend_FreeFn =
    unsafe extern "C" fn(backend: Qnn_BackendHandle_t) -> Qnn_ErrorHandle_t;
pub type QnnDevice_CreateFn = unsafe extern "C" fn(
    log: Qnn_LogHandle_t,
    config: *const *const c_void,
    out: *mut Qnn_DeviceHandle_t,
) -> Qnn_ErrorHandle_t;
pub type QnnDevice_FreeFn = unsafe extern "C" fn(device: Qnn_DeviceHandle_t) -> Qnn_ErrorHandle_t;
pub type QnnContext_CreateFromBinaryFn = unsafe extern "C" fn(
    backend: Qnn_BackendHandle_t,
    device: Qnn_DeviceHandle_t,
    config: *const *const QnnContext_Config_t,
    binary: *const c_void,
    binary_size: u64,
    out: *mut Qnn_ContextHandle_t,
    profile: Qnn_ProfileHandle_t,
) -> Qnn_ErrorHandle_t;
pub type QnnContext_FreeFn = unsafe extern "C" fn(
    context: Qnn_ContextHandle_t,
    profile: Qnn_ProfileHandle_t,
) -> Qnn_ErrorHandle_t;
pub type QnnGraph_RetrieveFn = unsafe extern "C" fn(
    context: Qnn_ContextHandle_t,
    name: *const c_char,
    out: *mut Qnn_GraphHandle_t,
) -> Qnn_ErrorHandle_t;
pub type QnnGraph_ExecuteFn = unsafe extern "C" fn(
    graph: Qnn_GraphHandle_t,
    inputs: *const Qnn_Tensor_t,
    num_inputs: u32,
    outputs: *mut Qnn_Tensor_t,
    num_outputs: u32,
    profile: Qnn_ProfileHandle_t,
    signal: Qnn_SignalHandle_t,
) -> Qnn_ErrorHandle_t;
/// `Qnn_NotifyStatus_t`: how one `QnnGraph_executeAsync` ended, as its notify callback is told.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Qnn_NotifyStatus_t {
    pub error: Qnn_ErrorHandle_t,
}

/// `Qnn_NotifyFn_t`: the callback `QnnGraph_executeAsync` calls when an execute it queued has
/// finished, on a thread of the backend's, with the `notifyParam` the execute was given. Not
/// called for a `QnnGraph_executeAsync` call that itself failed.
pub type Qnn_NotifyFn_t =
    unsafe extern "C" fn(notify_param: *mut c_void, notify_status: Qnn_NotifyStatus_t);

/// `QnnGraph_executeAsync`: queues an execute (FIFO, on the context's queue, shared with
/// `QnnGraph_execute`) and returns; blocks while the queue is full. The tensors' client buffers
/// must stay valid until the notify callback ran.
pub type QnnGraph_ExecuteAsyncFn = unsafe extern "C" fn(
    graph: Qnn_GraphHandle_t,
    inputs: *const Qnn_Tensor_t,
    num_inputs: u32,
    outputs: *mut Qnn_Tensor_t,
    num_outputs: u32,
    profile: Qnn_ProfileHandle_t,
    signal: Qnn_SignalHandle_t,
    notify_fn: Option<Qnn_NotifyFn_t>,
    notify_param: *mut c_void,
) -> Qnn_ErrorHandle_t;
pub type QnnDevice_GetPlatformInfoFn = unsafe extern "C" fn(
    log: Qnn_LogHandle_t,
    out: *mut *const QnnDevice_PlatformInfo_t,
) -> Qnn_ErrorHandle_t;
pub type QnnDevice_FreePlatformInfoFn = unsafe extern "C" fn(
    log: Qnn_LogHandle_t,
    info: *const QnnDevice_PlatformInfo_t,
) -> Qnn_ErrorHandle_t;
pub type QnnError_GetMessageFn =
    unsafe extern "C" fn(code: Qnn_ErrorHandle_t, out: *mut *const c_char) -> Qnn_ErrorHandle_t;
/// `QnnError_getVerboseMessage`: the text stays the backend's until
/// `QnnError_freeVerboseMessage` is called with it.
pub type QnnError_GetVerboseMessageFn =
    unsafe extern "C" fn(code: Qnn_ErrorHandle_t, out: *mut *const c_char) -> Qnn_ErrorHandle_t;
pub type QnnError_FreeVerboseMessageFn =
    unsafe extern "C" fn(message: *const c_char) -> Qnn_ErrorHandle_t;

/// `QnnInterface_ImplementationV2_32_t`: the core function table, 71 entries. Entries past the
/// library's reported core minor must never be read (see `CORE_TABLE_ENTRIES_BY_MINOR`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnInterface_ImplementationV2_32_t {
    pub propertyHasCapability: Option<QnnProperty_HasCapabilityFn>,
    pub backendCreate: Option<QnnBackend_CreateFn>,
    pub backendSetConfig: OpaqueFn,
    pub backendGetApiVersion: Option<QnnBackend_GetApiVersionFn>,
    pub backendGetBuildId: Option<QnnBackend_GetBuildIdFn>,
    pub backendRegisterOpPackage: OpaqueFn,
    pub backendGetSupportedOperations: OpaqueFn,
    pub backendValidateOpConfig: OpaqueFn,
    pub backendFree: Option<QnnBackend_FreeFn>,
    pub contextCreate: OpaqueFn,
    pub contextSetConfig: OpaqueFn,
    pub contextGetBinarySize: OpaqueFn,
    pub contextGetBinary: OpaqueFn,
    pub contextCreateFromBinary: Option<QnnContext_CreateFromBinaryFn>,
    pub contextFree: Option<QnnContext_FreeFn>,
    pub graphCreate: OpaqueFn,
    pub graphCreateSubgraph: OpaqueFn,
    pub graphSetConfig: OpaqueFn,
    pub graphAddNode: OpaqueFn,
    pub graphFinalize: OpaqueFn,
    pub graphRetrieve: Option<QnnGraph_RetrieveFn>,
    pub graphExecute: Option<QnnGraph_ExecuteFn>,
    pub graphExecuteAsync: Option<QnnGraph_ExecuteAsyncFn>,
    pub tensorCreateContextTensor: OpaqueFn,
    pub tensorCreateGraphTensor: OpaqueFn,
    pub logCreate: Option<QnnLog_CreateFn>,
    pub logSetLogLevel: Option<QnnLog_SetLogLevelFn>,
    pub logFree: Option<QnnLog_FreeFn>,
    pub profileCreate: Option<QnnProfile_CreateFn>,
    pub profileSetConfig: Option<QnnProfile_SetConfigFn>,
    pub profileGetEvents: Option<QnnProfile_GetEventsFn>,
    pub profileGetSubEvents: Option<QnnProfile_GetSubEventsFn>,
    pub profileGetEventData: Option<QnnProfile_GetEventDataFn>,
    pub profileGetExtendedEventData: Option<QnnProfile_GetExtendedEventDataFn>,
    pub profileFree: Option<QnnProfile_FreeFn>,
    pub memRegister: Option<QnnMem_RegisterFn>,
    pub memDeRegister: Option<QnnMem_DeRegisterFn>,
    pub deviceGetPlatformInfo: Option<QnnDevice_GetPlatformInfoFn>,
    pub deviceFreePlatformInfo: Option<QnnDevice_FreePlatformInfoFn>,
    pub deviceGetInfrastructure: Option<QnnDevice_GetInfrastructureFn>,
    pub deviceCreate: Option<QnnDevice_CreateFn>,
    pub deviceSetConfig: OpaqueFn,
    pub deviceGetInfo: OpaqueFn,
    pub deviceFree: Option<QnnDevice_FreeFn>,
    pub signalCreate: OpaqueFn,
    pub signalSetConfig: OpaqueFn,
    pub signalTrigger: OpaqueFn,
    pub signalFree: OpaqueFn,
    pub errorGetMessage: Option<QnnError_GetMessageFn>,
    pub errorGetVerboseMessage: Option<QnnError_GetVerboseMessageFn>,
    pub errorFreeVerboseMessage: Option<QnnError_FreeVerboseMessageFn>,
    pub graphPrepareExecutionEnvironment: OpaqueFn,
    pub graphReleaseExecutionEnvironment: OpaqueFn,
    pub graphGetProperty: OpaqueFn,
    pub contextValidateBinary: OpaqueFn,
    pub contextCreateFromBinaryWithSignal: OpaqueFn,
    pub contextCreateFromBinaryListAsync: OpaqueFn,
    pub tensorUpdateGraphTensors: OpaqueFn,
    pub tensorUpdateContextTensors: OpaqueFn,
    pub contextGetBinarySectionSize: OpaqueFn,
    pub contextGetBinarySection: OpaqueFn,
    pub contextApplyBinarySection: OpaqueFn,
    pub backendGetProperty: OpaqueFn,
    pub contextGetProperty: OpaqueFn,
    pub contextGetIncrementalBinary: OpaqueFn,
    pub contextReleaseIncrementalBinary: OpaqueFn,
    pub contextFinalize: OpaqueFn,
    pub globalConfigSet: OpaqueFn,
    pub contextCreateFromBinaryWithCallback: OpaqueFn,
    pub contextGetBinarySectionUpdate: OpaqueFn,
    pub contextFreeBinarySectionUpdate: OpaqueFn,
}

/// `QnnInterface_t`: one provider of a backend library.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnInterface_t {
    pub backendId: u32,
    pub providerName: *const c_char,
    pub apiVersion: Qnn_ApiVersion_t,
    pub table: QnnInterface_ImplementationV2_32_t,
}

/// `QnnSystemInterface_ImplementationV1_7_t`: the System function table, 16 entries.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemInterface_ImplementationV1_7_t {
    pub systemContextCreate: Option<QnnSystemContext_CreateFn>,
    pub systemContextGetBinaryInfo: Option<QnnSystemContext_GetBinaryInfoFn>,
    pub systemContextGetMetaData: Option<QnnSystemContext_GetMetaDataFn>,
    pub systemContextFree: Option<QnnSystemContext_FreeFn>,
    pub systemTensorGetMemoryFootprint: OpaqueFn,
    pub systemLogCreate: OpaqueFn,
    pub systemLogSetLogLevel: OpaqueFn,
    pub systemLogFree: OpaqueFn,
    pub systemDlcCreateFromFile: OpaqueFn,
    pub systemDlcCreateFromBinary: OpaqueFn,
    pub systemDlcComposeGraphs: OpaqueFn,
    pub systemDlcGetOpMappings: OpaqueFn,
    pub systemDlcFree: OpaqueFn,
    pub systemProfileCreateSerializationTarget: OpaqueFn,
    pub systemProfileSerializeEventData: OpaqueFn,
    pub systemProfileFreeSerializationTarget: OpaqueFn,
}

/// `QnnSystemInterface_t`: one provider of `libQnnSystem.so`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnSystemInterface_t {
    pub backendId: u32,
    pub providerName: *const c_char,
    pub systemApiVersion: Qnn_Version_t,
    pub table: QnnSystemInterface_ImplementationV1_7_t,
}

pub type QnnSystemContext_CreateFn =
    unsafe extern "C" fn(out: *mut QnnSystemContext_Handle_t) -> Qnn_ErrorHandle_t;
pub type QnnSystemContext_GetBinaryInfoFn = unsafe extern "C" fn(
    handle: QnnSystemContext_Handle_t,
    binary: *mut c_void,
    binary_size: u64,
    out: *mut *const QnnSystemContext_BinaryInfo_t,
    out_size: *mut u64,
) -> Qnn_ErrorHandle_t;
pub type QnnSystemContext_GetMetaDataFn = unsafe extern "C" fn(
    handle: QnnSystemContext_Handle_t,
    binary: *const c_void,
    binary_size: u64,
    out: *mut *const QnnSystemContext_BinaryInfo_t,
) -> Qnn_ErrorHandle_t;
pub type QnnSystemContext_FreeFn =
    unsafe extern "C" fn(handle: QnnSystemContext_Handle_t) -> Qnn_ErrorHandle_t;

/// The core API this table is declared for.
pub const QNN_API_VERSION_MAJOR: u32 = 2;
pub const QNN_API_VERSION_MINOR: u32 = 32;
/// The System API this table is declared for.
pub const QNN_SYSTEM_API_VERSION_MAJOR: u32 = 1;
pub const QNN_SYSTEM_API_VERSION_MINOR: u32 = 7;

/// Index of the last core-table entry the runtime calls (`errorFreeVerboseMessage`), which
/// every supported minor provides. Entries after it are never read.
pub const CORE_TABLE_LAST_USED_INDEX: usize = 50;

/// Number of core-table entries a library of the given core minor guarantees, for the minors
/// this crate accepts (2.18 onwards; the table is append-only from 2.18 to 2.32).
pub const fn core_table_entries(minor: u32) -> usize {
    match minor {
        0..=17 => 0,
        18..=21 => 62,
        22..=24 => 64,
        25 => 66,
        26 => 67,
        27 => 68,
        28..=30 => 69,
        _ => 71,
    }
}

/// Number of System-table entries a library of the given System minor guarantees.
pub const fn system_table_entries(minor: u32) -> usize {
    match minor {
        0 => 0,
        1 => 4,
        2..=4 => 13,
        _ => 16,
    }
}
