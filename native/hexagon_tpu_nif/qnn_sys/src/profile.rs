//! `QnnProfile.h` and the event types of `HTP/QnnHtpProfile.h`: profile handles, their events,
//! and what each event's type and unit mean.

use std::ffi::{c_char, c_void};

use super::*;

/// `QnnProfile_Level_t`.
pub type QnnProfile_Level_t = u32;
/// `QnnProfile_EventId_t`: an event of a profile handle, valid until the handle is freed.
pub type QnnProfile_EventId_t = u64;

pub const QNN_PROFILE_LEVEL_BASIC: QnnProfile_Level_t = 1;
pub const QNN_PROFILE_LEVEL_DETAILED: QnnProfile_Level_t = 2;
/// Backend-specific levels start here.
pub const QNN_PROFILE_LEVEL_BACKEND: QnnProfile_Level_t = 1000;
/// `QNN_HTP_PROFILE_LEVEL_LINTING`: per-op main-thread and background-op metrics.
pub const QNN_HTP_PROFILE_LEVEL_LINTING: QnnProfile_Level_t = 7001;

// `QnnProfile_EventUnit_t`.
pub const QNN_PROFILE_EVENTUNIT_MICROSEC: u32 = 1;
pub const QNN_PROFILE_EVENTUNIT_BYTES: u32 = 2;
pub const QNN_PROFILE_EVENTUNIT_CYCLES: u32 = 3;
pub const QNN_PROFILE_EVENTUNIT_COUNT: u32 = 4;
pub const QNN_PROFILE_EVENTUNIT_OBJECT: u32 = 5;
pub const QNN_PROFILE_EVENTUNIT_NONE: u32 = 6;
pub const QNN_PROFILE_EVENTUNIT_BACKEND: u32 = 1000;

// `QnnProfile_EventType_t`, generic (`QnnProfile.h`).
pub const QNN_PROFILE_EVENTTYPE_INIT: u32 = 100;
pub const QNN_PROFILE_EVENTTYPE_FINALIZE: u32 = 300;
pub const QNN_PROFILE_EVENTTYPE_EXECUTE: u32 = 400;
pub const QNN_PROFILE_EVENTTYPE_NODE: u32 = 404;
pub const QNN_PROFILE_EVENTTYPE_EXECUTE_QUEUE_WAIT: u32 = 405;
pub const QNN_PROFILE_EVENTTYPE_EXECUTE_PREPROCESS: u32 = 406;
pub const QNN_PROFILE_EVENTTYPE_EXECUTE_DEVICE: u32 = 407;
pub const QNN_PROFILE_EVENTTYPE_EXECUTE_POSTPROCESS: u32 = 408;
pub const QNN_PROFILE_EVENTTYPE_DEINIT: u32 = 500;
pub const QNN_PROFILE_EVENTTYPE_TRACE: u32 = 600;
pub const QNN_PROFILE_EVENTTYPE_BACKEND: u32 = 1000;

// `QnnProfile_EventType_t`, HTP (`HTP/QnnHtpProfile.h`), the execute's and the nodes'.
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_HOST_RPC_TIME_MICROSEC: u32 = 3001;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_HTP_RPC_TIME_MICROSEC: u32 = 3002;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_CYCLE: u32 = 3003;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_TIME_MICROSEC: u32 = 3004;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_MISC_ACCEL_TIME_MICROSEC: u32 = 3005;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_YIELD_INSTANCE_RELEASE_TIME: u32 = 3006;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_YIELD_INSTANCE_WAIT_TIME: u32 = 3007;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_YIELD_INSTANCE_RESTORE_TIME: u32 = 3008;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_YIELD_COUNT: u32 = 3009;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_VTCM_ACQUIRE_TIME: u32 = 3010;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_RESOURCE_POWER_UP_TIME: u32 = 3011;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_ACCEL_EXCL_WAIT_TIME_MICROSEC: u32 = 3012;
pub const QNN_HTP_PROFILE_EVENTTYPE_NODE_WAIT: u32 = 5001;
pub const QNN_HTP_PROFILE_EVENTTYPE_NODE_OVERLAP: u32 = 5002;
pub const QNN_HTP_PROFILE_EVENTTYPE_NODE_WAIT_OVERLAP: u32 = 5003;
pub const QNN_HTP_PROFILE_EVENTTYPE_NODE_RESOURCEMASK: u32 = 5004;
pub const QNN_HTP_PROFILE_EVENTTYPE_NODE_CRITICAL_BG_OP_ID: u32 = 5005;
pub const QNN_HTP_PROFILE_EVENTTYPE_NODE_WAIT_BG_OP_ID: u32 = 5006;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_EXECUTE_CRITICAL_ACCEL_TIME_CYCLE: u32 = 6001;
pub const QNN_HTP_PROFILE_EVENTTYPE_GRAPH_NUMBER_OF_HVX_THREADS: u32 = 8001;

/// `QnnProfile_ConfigOption_t`.
pub const QNN_PROFILE_CONFIG_OPTION_CUSTOM: u32 = 0;
pub const QNN_PROFILE_CONFIG_OPTION_MAX_EVENTS: u32 = 1;
/// From QNN 2.41 (core API 2.29+) an optrace needs this set explicitly on a detailed handle.
pub const QNN_PROFILE_CONFIG_OPTION_ENABLE_OPTRACE: u32 = 2;

/// `QNN_PROPERTY_PROFILE_SUPPORTS_EXTENDED_EVENT` (`QNN_PROPERTY_GROUP_CORE` + 1400 + 3).
pub const QNN_PROPERTY_PROFILE_SUPPORTS_EXTENDED_EVENT: u32 = 1403;
/// `QNN_PROPERTY_PROFILE_SUPPORT_OPTRACE_CONFIG` (`QNN_PROPERTY_GROUP_CORE` + 1400 + 4).
pub const QNN_PROPERTY_PROFILE_SUPPORT_OPTRACE_CONFIG: u32 = 1404;

/// `QnnProfile_EventData_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QnnProfile_EventData_t {
    pub type_: u32,
    pub unit: u32,
    pub value: u64,
    pub identifier: *const c_char,
}

impl Default for QnnProfile_EventData_t {
    fn default() -> Self {
        QnnProfile_EventData_t {
            type_: 0,
            unit: 0,
            value: 0,
            identifier: std::ptr::null(),
        }
    }
}

/// `Qnn_Scalar_t`'s anonymous union.
#[repr(C)]
#[derive(Clone, Copy)]
pub union Qnn_ScalarValue_t {
    pub floatValue: f32,
    pub doubleValue: f64,
    pub uint64Value: u64,
    pub int64Value: i64,
    pub uint32Value: u32,
    pub int32Value: i32,
    pub uint16Value: u16,
    pub int16Value: i16,
    pub uint8Value: u8,
    pub int8Value: i8,
    pub bool8Value: u8,
    pub bfloat16Value: i16,
    pub stringValue: *const c_char,
}

/// `Qnn_Scalar_t`: a value and its `Qnn_DataType_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Qnn_Scalar_t {
    pub dataType: u32,
    pub value: Qnn_ScalarValue_t,
}

/// `Qnn_OpaqueObject_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Qnn_OpaqueObject_t {
    pub data: *mut c_void,
    pub len: u64,
}

/// `QnnProfile_BackendOpaqueObject_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QnnProfile_BackendOpaqueObject_t {
    pub opaqueObject: Qnn_OpaqueObject_t,
    pub fileName: *const c_char,
}

/// `QnnProfile_ExtendedEventDataV1_t`'s anonymous union: `value` for the units MICROSEC,
/// BYTES, CYCLES and COUNT, `backendOpaqueObject` for OBJECT.
#[repr(C)]
#[derive(Clone, Copy)]
pub union QnnProfile_ExtendedEventValue_t {
    pub value: Qnn_Scalar_t,
    pub backendOpaqueObject: QnnProfile_BackendOpaqueObject_t,
}

/// `QnnProfile_ExtendedEventDataV1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnProfile_ExtendedEventDataV1_t {
    pub type_: u32,
    pub unit: u32,
    pub data: QnnProfile_ExtendedEventValue_t,
    /// Microseconds.
    pub timestamp: u64,
    pub identifier: *const c_char,
}

/// `QnnProfile_ExtendedEventDataVersion_t`'s one version.
pub const QNN_PROFILE_DATA_VERSION_1: u32 = 1;

/// `QnnProfile_ExtendedEventData_t`. C: `union { QnnProfile_ExtendedEventDataV1_t v1; }`, its
/// only member held directly.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnProfile_ExtendedEventData_t {
    pub version: u32,
    pub v1: QnnProfile_ExtendedEventDataV1_t,
}

impl QnnProfile_ExtendedEventData_t {
    /// `QNN_PROFILE_EXTENDED_EVENT_DATA_INIT`.
    pub const fn zeroed() -> Self {
        QnnProfile_ExtendedEventData_t {
            version: QNN_PROFILE_DATA_VERSION_1,
            v1: QnnProfile_ExtendedEventDataV1_t {
                type_: 0,
                unit: 0,
                data: QnnProfile_ExtendedEventValue_t {
                    backendOpaqueObject: QnnProfile_BackendOpaqueObject_t {
                        opaqueObject: Qnn_OpaqueObject_t {
                            data: std::ptr::null_mut(),
                            len: 0,
                        },
                        fileName: std::ptr::null(),
                    },
                },
                timestamp: 0,
                identifier: std::ptr::null(),
            },
        }
    }
}

/// `QnnProfile_Config_t`'s anonymous union.
#[repr(C)]
#[derive(Clone, Copy)]
pub union QnnProfile_ConfigValue_t {
    pub customConfig: *mut c_void,
    pub numMaxEvents: u64,
    pub enableOptrace: u8,
}

/// `QnnProfile_Config_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QnnProfile_Config_t {
    pub option: u32,
    pub value: QnnProfile_ConfigValue_t,
}

pub type QnnProfile_CreateFn = unsafe extern "C" fn(
    backend: Qnn_BackendHandle_t,
    level: QnnProfile_Level_t,
    out: *mut Qnn_ProfileHandle_t,
) -> Qnn_ErrorHandle_t;
pub type QnnProfile_SetConfigFn = unsafe extern "C" fn(
    profile: Qnn_ProfileHandle_t,
    config: *const *const QnnProfile_Config_t,
) -> Qnn_ErrorHandle_t;
pub type QnnProfile_GetEventsFn = unsafe extern "C" fn(
    profile: Qnn_ProfileHandle_t,
    events: *mut *const QnnProfile_EventId_t,
    num_events: *mut u32,
) -> Qnn_ErrorHandle_t;
pub type QnnProfile_GetSubEventsFn = unsafe extern "C" fn(
    event: QnnProfile_EventId_t,
    sub_events: *mut *const QnnProfile_EventId_t,
    num_sub_events: *mut u32,
) -> Qnn_ErrorHandle_t;
pub type QnnProfile_GetEventDataFn = unsafe extern "C" fn(
    event: QnnProfile_EventId_t,
    data: *mut QnnProfile_EventData_t,
) -> Qnn_ErrorHandle_t;
pub type QnnProfile_GetExtendedEventDataFn = unsafe extern "C" fn(
    event: QnnProfile_EventId_t,
    data: *mut QnnProfile_ExtendedEventData_t,
) -> Qnn_ErrorHandle_t;
pub type QnnProfile_FreeFn =
    unsafe extern "C" fn(profile: Qnn_ProfileHandle_t) -> Qnn_ErrorHandle_t;
