//! Provider structs for `QnnInterface_getProviders` / `QnnSystemInterface_getProviders`.
//!
//! Providers are rebuilt when the knobs change and the old ones are leaked, so every pointer
//! ever handed out stays valid until the library is unloaded.
//!
//! Each provider is placed so that it ends where its reported API minor says it ends (a 2.18
//! provider is 536 bytes, not our full 608) right before an inaccessible page: a runtime that
//! reads a table entry its provider's minor does not guarantee, or copies the struct whole,
//! crashes the test instead of passing by luck.

use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Mutex};

use qnn_sys::*;

use super::core::*;
use super::execute::*;
use super::execute_async::*;
use super::profile::*;
use super::state::*;
use super::system::*;

/// Table entries that `null_entries` may name (the ones this backend implements).
const ENTRY_NAMES: [&str; 32] = [
    "propertyHasCapability",
    "profileCreate",
    "profileSetConfig",
    "profileGetEvents",
    "profileGetSubEvents",
    "profileGetEventData",
    "profileGetExtendedEventData",
    "profileFree",
    "backendCreate",
    "backendGetApiVersion",
    "backendGetBuildId",
    "backendFree",
    "contextCreateFromBinary",
    "contextFree",
    "graphRetrieve",
    "graphExecute",
    "graphExecuteAsync",
    "logCreate",
    "logSetLogLevel",
    "logFree",
    "deviceCreate",
    "deviceFree",
    "deviceGetPlatformInfo",
    "deviceFreePlatformInfo",
    "deviceGetInfrastructure",
    "errorGetMessage",
    "memRegister",
    "memDeRegister",
    "systemContextCreate",
    "systemContextGetBinaryInfo",
    "systemContextGetMetaData",
    "systemContextFree",
];

/// The `null_entries` knob: the table entries named (comma- or semicolon-separated) are NULL
/// in the providers built from now on. False, and nothing set, if a name is not an entry.
pub fn set_null_entries(k: &mut Knobs, value: &str) -> bool {
    let names: Vec<String> = value
        .split([',', ';'])
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    if names.iter().all(|n| is_entry_name(n)) {
        k.null_entries = names;
        true
    } else {
        false
    }
}

/// `QnnInterface_getProviders`: the one bootstrap symbol of a backend library.
///
/// # Safety
/// `provider_list` and `num_providers` must be NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnInterface_getProviders(
    provider_list: *mut *const *const QnnInterface_t,
    num_providers: *mut u32,
) -> Qnn_ErrorHandle_t {
    // SAFETY: the caller's contract, as this function's.
    guard(|| unsafe { hand_out(provider_list, num_providers, core_providers) })
}

/// `QnnSystemInterface_getProviders`: the bootstrap symbol of the System library (this same
/// library serves as both).
///
/// # Safety
/// `provider_list` and `num_providers` must be NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnSystemInterface_getProviders(
    provider_list: *mut *const *const QnnSystemInterface_t,
    num_providers: *mut u32,
) -> Qnn_ErrorHandle_t {
    // SAFETY: the caller's contract, as this function's.
    guard(|| unsafe { hand_out(provider_list, num_providers, system_providers) })
}

/// Writes the provider table `providers` makes, `(address, count)`, to a bootstrap symbol's
/// out-parameters, or answers INVALID_ARGUMENT for a NULL one (before making the table).
///
/// # Safety
/// `provider_list` and `num_providers` must be NULL or valid for writes.
unsafe fn hand_out<T>(
    provider_list: *mut *const *const T,
    num_providers: *mut u32,
    providers: fn() -> (usize, u32),
) -> Qnn_ErrorHandle_t {
    if provider_list.is_null() || num_providers.is_null() {
        return err(QNN_COMMON_ERROR_INVALID_ARGUMENT);
    }
    let (addr, n) = providers();
    // SAFETY: both checked non-NULL; the caller passes writable out-parameters.
    unsafe {
        provider_list.write(addr as *const *const T);
        num_providers.write(n);
    }
    0
}

fn is_entry_name(name: &str) -> bool {
    ENTRY_NAMES.contains(&name)
}

fn empty_core_table() -> QnnInterface_ImplementationV2_32_t {
    QnnInterface_ImplementationV2_32_t {
        propertyHasCapability: None,
        backendCreate: None,
        backendSetConfig: None,
        backendGetApiVersion: None,
        backendGetBuildId: None,
        backendRegisterOpPackage: None,
        backendGetSupportedOperations: None,
        backendValidateOpConfig: None,
        backendFree: None,
        contextCreate: None,
        contextSetConfig: None,
        contextGetBinarySize: None,
        contextGetBinary: None,
        contextCreateFromBinary: None,
        contextFree: None,
        graphCreate: None,
        graphCreateSubgraph: None,
        graphSetConfig: None,
        graphAddNode: None,
        graphFinalize: None,
        graphRetrieve: None,
        graphExecute: None,
        graphExecuteAsync: None,
        tensorCreateContextTensor: None,
        tensorCreateGraphTensor: None,
        logCreate: None,
        logSetLogLevel: None,
        logFree: None,
        profileCreate: None,
        profileSetConfig: None,
        profileGetEvents: None,
        profileGetSubEvents: None,
        profileGetEventData: None,
        profileGetExtendedEventData: None,
        profileFree: None,
        memRegister: None,
        memDeRegister: None,
        deviceGetPlatformInfo: None,
        deviceFreePlatformInfo: None,
        deviceGetInfrastructure: None,
        deviceCreate: None,
        deviceSetConfig: None,
        deviceGetInfo: None,
        deviceFree: None,
        signalCreate: None,
        signalSetConfig: None,
        signalTrigger: None,
        signalFree: None,
        errorGetMessage: None,
        errorGetVerboseMessage: None,
        errorFreeVerboseMessage: None,
        graphPrepareExecutionEnvironment: None,
        graphReleaseExecutionEnvironment: None,
        graphGetProperty: None,
        contextValidateBinary: None,
        contextCreateFromBinaryWithSignal: None,
        contextCreateFromBinaryListAsync: None,
        tensorUpdateGraphTensors: None,
        tensorUpdateContextTensors: None,
        contextGetBinarySectionSize: None,
        contextGetBinarySection: None,
        contextApplyBinarySection: None,
        backendGetProperty: None,
        contextGetProperty: None,
        contextGetIncrementalBinary: None,
        contextReleaseIncrementalBinary: None,
        contextFinalize: None,
        globalConfigSet: None,
        contextCreateFromBinaryWithCallback: None,
        contextGetBinarySectionUpdate: None,
        contextFreeBinarySectionUpdate: None,
    }
}

fn core_table(nulls: &[String]) -> QnnInterface_ImplementationV2_32_t {
    let on = |name: &str| !nulls.iter().any(|n| n == name);
    let mut t = empty_core_table();
    macro_rules! set {
        ($field:ident, $f:expr) => {
            if on(stringify!($field)) {
                t.$field = Some($f);
            }
        };
    }
    set!(propertyHasCapability, QnnProperty_hasCapability);
    set!(backendCreate, QnnBackend_create);
    set!(backendGetApiVersion, QnnBackend_getApiVersion);
    set!(backendGetBuildId, QnnBackend_getBuildId);
    set!(backendFree, QnnBackend_free);
    set!(contextCreateFromBinary, QnnContext_createFromBinary);
    set!(contextFree, QnnContext_free);
    set!(graphRetrieve, QnnGraph_retrieve);
    set!(graphExecute, QnnGraph_execute);
    set!(graphExecuteAsync, QnnGraph_executeAsync);
    set!(logCreate, QnnLog_create);
    set!(logSetLogLevel, QnnLog_setLogLevel);
    set!(logFree, QnnLog_free);
    set!(deviceCreate, QnnDevice_create);
    set!(deviceFree, QnnDevice_free);
    set!(deviceGetPlatformInfo, QnnDevice_getPlatformInfo);
    set!(deviceFreePlatformInfo, QnnDevice_freePlatformInfo);
    set!(
        deviceGetInfrastructure,
        super::perf::QnnDevice_getInfrastructure
    );
    set!(errorGetMessage, QnnError_getMessage);
    set!(profileCreate, QnnProfile_create);
    set!(profileSetConfig, QnnProfile_setConfig);
    set!(profileGetEvents, QnnProfile_getEvents);
    set!(profileGetSubEvents, QnnProfile_getSubEvents);
    set!(profileGetEventData, QnnProfile_getEventData);
    set!(profileGetExtendedEventData, QnnProfile_getExtendedEventData);
    set!(profileFree, QnnProfile_free);
    set!(memRegister, super::mem::QnnMem_register);
    set!(memDeRegister, super::mem::QnnMem_deRegister);
    t
}

fn system_table(nulls: &[String], minor: u32) -> QnnSystemInterface_ImplementationV1_7_t {
    let on = |name: &str| !nulls.iter().any(|n| n == name);
    let mut t = QnnSystemInterface_ImplementationV1_7_t {
        systemContextCreate: None,
        systemContextGetBinaryInfo: None,
        systemContextGetMetaData: None,
        systemContextFree: None,
        systemTensorGetMemoryFootprint: None,
        systemLogCreate: None,
        systemLogSetLogLevel: None,
        systemLogFree: None,
        systemDlcCreateFromFile: None,
        systemDlcCreateFromBinary: None,
        systemDlcComposeGraphs: None,
        systemDlcGetOpMappings: None,
        systemDlcFree: None,
        systemProfileCreateSerializationTarget: None,
        systemProfileSerializeEventData: None,
        systemProfileFreeSerializationTarget: None,
    };
    if on("systemContextCreate") {
        // The create function decides the GraphInfo stride of every answer given through the
        // handle it makes, so each provider hands out the layout its own version implies.
        t.systemContextCreate = Some(if minor < 4 {
            QnnSimSystemContext_create_v1_1
        } else {
            QnnSystemContext_create
        });
    }
    if on("systemContextGetBinaryInfo") {
        t.systemContextGetBinaryInfo = Some(QnnSystemContext_getBinaryInfo);
    }
    if on("systemContextGetMetaData") {
        t.systemContextGetMetaData = Some(QnnSystemContext_getMetaData);
    }
    if on("systemContextFree") {
        t.systemContextFree = Some(QnnSystemContext_free);
    }
    t
}

/// (generation, address of the leaked pointer array, length).
type Cached = Mutex<Option<(u64, usize, u32)>>;
static CORE: LazyLock<Cached> = LazyLock::new(Default::default);
static SYSTEM: LazyLock<Cached> = LazyLock::new(Default::default);

/// The current core provider list (address of `[*const QnnInterface_t; n]`, n).
pub fn core_providers() -> (usize, u32) {
    let generation = KNOBS_GENERATION.load(Ordering::SeqCst);
    let mut cache = lock(&CORE);
    if let Some((g, addr, n)) = *cache
        && g == generation
    {
        return (addr, n);
    }
    let k = knobs();
    let name = intern(&k.provider_name);
    let list: Vec<*const QnnInterface_t> = k
        .core_providers
        .iter()
        .map(|&ver| {
            let mut table = core_table(&k.null_entries);
            if ver.major == 2 && core_table_entries(ver.minor) <= CORE_TABLE_LAST_USED_INDEX {
                // A pre-2.18 table has another layout: offer nothing usable in it.
                table = empty_core_table();
            }
            let p = QnnInterface_t {
                backendId: k.backend_id,
                providerName: name,
                apiVersion: Qnn_ApiVersion_t {
                    coreApiVersion: ver,
                    backendApiVersion: k.backend_api,
                },
                table,
            };
            place_before_guard_page(&p, core_provider_len(ver.minor))
        })
        .collect();
    let n = list.len() as u32;
    let addr = Box::leak(list.into_boxed_slice()).as_ptr() as usize;
    *cache = Some((generation, addr, n));
    (addr, n)
}

/// The current System provider list (address of `[*const QnnSystemInterface_t; n]`, n).
pub fn system_providers() -> (usize, u32) {
    let generation = KNOBS_GENERATION.load(Ordering::SeqCst);
    let mut cache = lock(&SYSTEM);
    if let Some((g, addr, n)) = *cache
        && g == generation
    {
        return (addr, n);
    }
    let k = knobs();
    let name = intern(&k.system_provider_name);
    let list: Vec<*const QnnSystemInterface_t> = k
        .system_providers
        .iter()
        .map(|&ver| {
            let p = QnnSystemInterface_t {
                backendId: k.backend_id,
                providerName: name,
                systemApiVersion: ver,
                table: system_table(&k.null_entries, ver.minor),
            };
            place_before_guard_page(&p, system_provider_len(ver.minor))
        })
        .collect();
    let n = list.len() as u32;
    let addr = Box::leak(list.into_boxed_slice()).as_ptr() as usize;
    *cache = Some((generation, addr, n));
    (addr, n)
}

/// Bytes of a `QnnInterface_t` a library of this core minor provides: the header and the
/// table entries the minor guarantees (at least one, so a provider is never empty).
pub fn core_provider_len(minor: u32) -> usize {
    (40 + core_table_entries(minor).max(1) * 8).min(size_of::<QnnInterface_t>())
}

/// Bytes of a `QnnSystemInterface_t` a library of this System minor provides.
pub fn system_provider_len(minor: u32) -> usize {
    (32 + system_table_entries(minor).max(1) * 8).min(size_of::<QnnSystemInterface_t>())
}

/// Copies the first `len` bytes of `value` so that they end exactly where an inaccessible
/// (`PROT_NONE`) page begins, and returns the copy's address. Leaked on purpose: providers live
/// as long as the library.
fn place_before_guard_page<T>(value: &T, len: usize) -> *const T {
    let len = len.min(size_of::<T>());
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let data_pages = len.div_ceil(page).max(1);
    let total = (data_pages + 1) * page;
    // SAFETY: an anonymous private mapping with no address hint; the result is checked.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert!(base != libc::MAP_FAILED, "mmap for a provider failed");
    let guard = base.cast::<u8>().wrapping_add(data_pages * page);
    // SAFETY: `guard` is the last page of the mapping just made.
    let protected = unsafe { libc::mprotect(guard.cast(), page, libc::PROT_NONE) };
    assert_eq!(protected, 0, "mprotect of a provider's guard page failed");
    // `len` is a multiple of 8 (a header of 32 or 40 bytes plus 8-byte entries), so the copy
    // keeps the struct's 8-byte alignment.
    let start = guard.wrapping_sub(len);
    // SAFETY: `start..guard` lies inside the writable part of the mapping; `value` is readable
    // for `len <= size_of::<T>()` bytes; the regions cannot overlap (the mapping is new).
    unsafe { std::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), start, len) };
    start.cast::<T>()
}
