//! Opening QNN libraries and choosing a provider.
//!
//! Only the two bootstrap symbols are resolved; everything else comes from the provider's function
//! table. Libraries are opened `RTLD_NOW | RTLD_LOCAL` and cached for the life of the process:
//! QNN backends start threads and register with the DSP driver, and unloading them is a known
//! source of crashes in other bindings, so a library stays mapped once opened (and therefore
//! outlives every handle created from it).

use std::collections::HashMap;
use std::ffi::{CStr, c_char};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use crate::base::error::{Error, LibraryRole, Result};
use crate::base::sync::lock;
use crate::base::version::Version;
use crate::sys::{self, QnnInterface_t, QnnSystemInterface_t};

/// Oldest core API accepted: 2.18 (QAIRT 2.25) is the oldest release whose function table is an
/// exact prefix of the 2.32 table and whose `Qnn_Tensor_t` is the 144-byte layout declared here.
pub const MIN_CORE_API: Version = Version::new(2, 18, 0);
/// Oldest System API accepted: 1.1 (QAIRT 2.25) has every entry the runtime calls.
pub const MIN_SYSTEM_API: Version = Version::new(1, 1, 0);
/// More providers than this in one library is taken as a corrupt answer.
const MAX_PROVIDERS: u32 = 64;

/// The functions the runtime calls in a backend library, copied out of the provider's table.
#[derive(Clone, Copy)]
pub(crate) struct CoreFns {
    pub log_create: Option<sys::QnnLog_CreateFn>,
    pub log_free: Option<sys::QnnLog_FreeFn>,
    pub backend_create: sys::QnnBackend_CreateFn,
    pub backend_free: sys::QnnBackend_FreeFn,
    pub backend_get_api_version: Option<sys::QnnBackend_GetApiVersionFn>,
    pub backend_get_build_id: Option<sys::QnnBackend_GetBuildIdFn>,
    pub device_create: Option<sys::QnnDevice_CreateFn>,
    pub device_free: Option<sys::QnnDevice_FreeFn>,
    pub device_get_platform_info: Option<sys::QnnDevice_GetPlatformInfoFn>,
    pub device_free_platform_info: Option<sys::QnnDevice_FreePlatformInfoFn>,
    /// The HTP perf infrastructure ([`crate::perf`]); NULL in backends without one.
    pub device_get_infrastructure: Option<sys::QnnDevice_GetInfrastructureFn>,
    pub context_create_from_binary: sys::QnnContext_CreateFromBinaryFn,
    pub context_free: sys::QnnContext_FreeFn,
    pub graph_retrieve: sys::QnnGraph_RetrieveFn,
    pub graph_execute: sys::QnnGraph_ExecuteFn,
    /// Optional: a backend without asynchronous execution leaves the entry NULL. It sits at
    /// index 22, in every table a supported core minor guarantees.
    pub graph_execute_async: Option<sys::QnnGraph_ExecuteAsyncFn>,
    pub error_get_message: Option<sys::QnnError_GetMessageFn>,
    pub error_get_verbose_message: Option<sys::QnnError_GetVerboseMessageFn>,
    pub error_free_verbose_message: Option<sys::QnnError_FreeVerboseMessageFn>,
    pub property_has_capability: Option<sys::QnnProperty_HasCapabilityFn>,
    /// QnnMem (shared buffers): NULL in backends without it.
    pub mem_register: Option<sys::QnnMem_RegisterFn>,
    pub mem_deregister: Option<sys::QnnMem_DeRegisterFn>,
    /// The QnnProfile entries, when the library has every one the runtime needs.
    pub profile: Option<ProfileFns>,
}

/// An opened backend library and the provider chosen from it.
pub(crate) struct BackendLibrary {
    pub path: PathBuf,
    pub backend_id: u32,
    pub provider_name: String,
    pub core_api: Version,
    pub backend_api: Version,
    pub fns: CoreFns,
    _library: Library,
}

/// The functions the runtime calls in `libQnnSystem.so`.
#[derive(Clone, Copy)]
pub(crate) struct SystemFns {
    pub context_create: sys::QnnSystemContext_CreateFn,
    pub context_get_metadata: Option<sys::QnnSystemContext_GetMetaDataFn>,
    pub context_get_binary_info: Option<sys::QnnSystemContext_GetBinaryInfoFn>,
    pub context_free: sys::QnnSystemContext_FreeFn,
}

/// An opened System library and the provider chosen from it.
pub(crate) struct SystemLibrary {
    pub path: PathBuf,
    pub backend_id: u32,
    pub provider_name: String,
    pub system_api: Version,
    pub fns: SystemFns,
    _library: Library,
}

static BACKENDS: LazyLock<Mutex<HashMap<PathBuf, Arc<BackendLibrary>>>> =
    LazyLock::new(Default::default);
static SYSTEMS: LazyLock<Mutex<HashMap<PathBuf, Arc<SystemLibrary>>>> =
    LazyLock::new(Default::default);

/// Opens (or reuses) a backend library and negotiates its provider.
pub(crate) fn backend(path: &Path) -> Result<Arc<BackendLibrary>> {
    let mut cache = lock(&BACKENDS);
    if let Some(lib) = cache.get(path) {
        return Ok(Arc::clone(lib));
    }
    let lib = Arc::new(open_backend(path)?);
    cache.insert(path.to_path_buf(), Arc::clone(&lib));
    Ok(lib)
}

/// Opens (or reuses) a System library and negotiates its provider.
pub(crate) fn system(path: &Path) -> Result<Arc<SystemLibrary>> {
    let mut cache = lock(&SYSTEMS);
    if let Some(lib) = cache.get(path) {
        return Ok(Arc::clone(lib));
    }
    let lib = Arc::new(open_system(path)?);
    cache.insert(path.to_path_buf(), Arc::clone(&lib));
    Ok(lib)
}

fn open(path: &Path, role: LibraryRole) -> Result<Library> {
    let _in_qnn = crate::base::exit::enter()?;
    // SAFETY: loading a library runs its initializers. The paths name QNN libraries (or the
    // project's own qnn_sim), whose initializers only set up internal state.
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
        Error::LibraryNotFound {
            role,
            tried: vec![(path.to_path_buf(), describe(&e))],
        }
    })?;
    // The library's initializers registered its exit-time destructors; ours must run first.
    crate::base::exit::guard_exit();
    Ok(library)
}

/// libloading's error says only "dlopen failed"; the `dlerror` text is its source.
pub(crate) fn describe(error: &libloading::Error) -> String {
    use std::error::Error as _;
    match error.source() {
        Some(source) => source.to_string(),
        None => error.to_string(),
    }
}

/// Reads the provider array a `getProviders` call returned.
///
/// # Safety
/// `list` must be what the library's `getProviders` wrote with `status == 0`, and the library
/// must stay loaded while the returned pointers are used.
unsafe fn provider_pointers<T>(list: *const *const T, count: u32) -> Result<Vec<*const T>, String> {
    if count > MAX_PROVIDERS {
        return Err(format!("it reported {count} providers"));
    }
    if count > 0 && list.is_null() {
        return Err(format!(
            "it reported {count} providers but a NULL provider list"
        ));
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        // SAFETY: the library promises `count` entries behind `list` (checked non-NULL above).
        let p = unsafe { *list.add(i) };
        if p.is_null() {
            return Err(format!("provider {i} is NULL"));
        }
        out.push(p);
    }
    Ok(out)
}

/// Chooses the provider with the given major and the highest minor not below `min`; on a tie
/// the first listed wins.
fn choose(offered: &[Version], min: Version) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, v) in offered.iter().enumerate() {
        if v.major != min.major || v.minor < min.minor {
            continue;
        }
        if best.is_none_or(|b| v.minor > offered[b].minor) {
            best = Some(i);
        }
    }
    best
}

/// # Safety
/// `s` must be NULL or a NUL-terminated string that lives as long as the library.
pub(crate) unsafe fn lossy_string(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// Calls a library's `getProviders` entry point and returns its provider pointers.
fn list_providers<T>(
    library: &Library,
    path: &Path,
    symbol: &'static str,
    min: Version,
) -> Result<Vec<*const T>> {
    let name = format!("{symbol}\0");
    // SAFETY: both QNN bootstrap symbols (`QnnInterface_getProviders`,
    // `QnnSystemInterface_getProviders`) have this C signature, with `T` the provider struct.
    let get_providers = unsafe {
        library
            .get::<unsafe extern "C" fn(*mut *const *const T, *mut u32) -> sys::Qnn_ErrorHandle_t>(
                name.as_bytes(),
            )
    }
    .map_err(|e| Error::MissingSymbol {
        path: path.to_path_buf(),
        symbol,
        detail: describe(&e),
    })?;
    let mut list: *const *const T = std::ptr::null();
    let mut count = 0u32;
    let _in_qnn = crate::base::exit::enter()?;
    // SAFETY: both out-pointers are valid for writes; the function is the library's entry point.
    sys::Status(unsafe { get_providers(&mut list, &mut count) })
        .ok_or_else(|raw| Error::qnn(symbol, raw))?;
    // SAFETY: `list`/`count` come from a successful getProviders call; the library stays loaded
    // for the life of the process.
    unsafe { provider_pointers(list, count) }.map_err(|why| Error::IncompatibleApi {
        path: path.to_path_buf(),
        offered: vec![],
        required: format!(">= {min} (the provider list is unusable: {why})"),
    })
}

fn open_backend(path: &Path) -> Result<BackendLibrary> {
    let library = open(path, LibraryRole::Backend)?;
    let providers: Vec<*const QnnInterface_t> =
        list_providers(&library, path, "QnnInterface_getProviders", MIN_CORE_API)?;
    // SAFETY: each pointer is a non-NULL provider struct inside the loaded library; the version
    // fields precede the table and exist in every core API version.
    let offered: Vec<Version> = providers
        .iter()
        .map(|p| unsafe { Version::from((**p).apiVersion.coreApiVersion) })
        .collect();
    let chosen = choose(&offered, MIN_CORE_API).ok_or_else(|| Error::IncompatibleApi {
        path: path.to_path_buf(),
        offered: offered.clone(),
        required: format!(
            "core API {}.x with x >= {}",
            MIN_CORE_API.major, MIN_CORE_API.minor
        ),
    })?;
    let provider = providers[chosen];
    let core_api = offered[chosen];
    // Every entry read below has an index ≤ CORE_TABLE_LAST_USED_INDEX, which a library of this
    // minor guarantees.
    debug_assert!(sys::core_table_entries(core_api.minor) > sys::CORE_TABLE_LAST_USED_INDEX);
    // SAFETY: `provider` is valid (see above). Fields are read one by one through raw pointers,
    // never by copying the struct: an older library's provider is shorter than our declaration.
    // Every table entry read has an index ≤ CORE_TABLE_LAST_USED_INDEX, which its minor
    // guarantees: `choose` took only a provider of at least MIN_CORE_API, whose table reaches
    // that index (the debug_assert above restates it in test builds).
    let (backend_id, provider_name, backend_api) = unsafe {
        (
            std::ptr::addr_of!((*provider).backendId).read(),
            std::ptr::addr_of!((*provider).providerName).read(),
            std::ptr::addr_of!((*provider).apiVersion.backendApiVersion).read(),
        )
    };
    macro_rules! entry {
        ($name:ident) => {
            // SAFETY: as above: one function-pointer field within the guaranteed entries.
            unsafe { std::ptr::addr_of!((*provider).table.$name).read() }
        };
    }
    let missing = |entry: &'static str| Error::MissingEntry {
        path: path.to_path_buf(),
        entry,
    };
    let fns = CoreFns {
        log_create: entry!(logCreate),
        log_free: entry!(logFree),
        backend_create: entry!(backendCreate).ok_or_else(|| missing("backendCreate"))?,
        backend_free: entry!(backendFree).ok_or_else(|| missing("backendFree"))?,
        backend_get_api_version: entry!(backendGetApiVersion),
        backend_get_build_id: entry!(backendGetBuildId),
        device_create: entry!(deviceCreate),
        device_free: entry!(deviceFree),
        device_get_platform_info: entry!(deviceGetPlatformInfo),
        device_free_platform_info: entry!(deviceFreePlatformInfo),
        device_get_infrastructure: entry!(deviceGetInfrastructure),
        context_create_from_binary: entry!(contextCreateFromBinary)
            .ok_or_else(|| missing("contextCreateFromBinary"))?,
        context_free: entry!(contextFree).ok_or_else(|| missing("contextFree"))?,
        graph_retrieve: entry!(graphRetrieve).ok_or_else(|| missing("graphRetrieve"))?,
        graph_execute: entry!(graphExecute).ok_or_else(|| missing("graphExecute"))?,
        graph_execute_async: entry!(graphExecuteAsync),
        error_get_message: entry!(errorGetMessage),
        error_get_verbose_message: entry!(errorGetVerboseMessage),
        error_free_verbose_message: entry!(errorFreeVerboseMessage),
        property_has_capability: entry!(propertyHasCapability),
        mem_register: entry!(memRegister),
        mem_deregister: entry!(memDeRegister),
        profile: ProfileFns::from_entries(
            (
                entry!(profileCreate),
                entry!(profileSetConfig),
                entry!(profileGetEvents),
            ),
            (entry!(profileGetSubEvents), entry!(profileGetEventData)),
            (entry!(profileGetExtendedEventData), entry!(profileFree)),
        ),
    };
    Ok(BackendLibrary {
        path: path.to_path_buf(),
        backend_id,
        // SAFETY: the provider name is NULL or a string inside the loaded library.
        provider_name: unsafe { lossy_string(provider_name) },
        core_api,
        backend_api: backend_api.into(),
        fns,
        _library: library,
    })
}

fn open_system(path: &Path) -> Result<SystemLibrary> {
    let library = open(path, LibraryRole::System)?;
    let providers: Vec<*const QnnSystemInterface_t> = list_providers(
        &library,
        path,
        "QnnSystemInterface_getProviders",
        MIN_SYSTEM_API,
    )?;
    // SAFETY: each pointer is a non-NULL provider struct; the version precedes the table.
    let offered: Vec<Version> = providers
        .iter()
        .map(|p| unsafe { Version::from((**p).systemApiVersion) })
        .collect();
    let usable = |v: &Version| sys::graph_info_stride(v.minor).is_some();
    let filtered: Vec<Version> = offered
        .iter()
        .map(|v| if usable(v) { *v } else { Version::default() })
        .collect();
    let chosen = choose(&filtered, MIN_SYSTEM_API).ok_or_else(|| Error::IncompatibleApi {
        path: path.to_path_buf(),
        offered: offered.clone(),
        required: format!(
            "System API {}.x with x = 1 or x >= 4 (the metadata layout of 1.2 and 1.3 was never measured)",
            MIN_SYSTEM_API.major
        ),
    })?;
    let system_api = offered[chosen];
    // SAFETY: the provider is valid; its first four table entries exist from System API 1.1 on,
    // and only those (and the two fields before the version) are read (the copy of the whole
    // table struct is avoided on purpose).
    let (backend_id, provider_name, create, get_metadata, get_binary_info, free) = unsafe {
        let p = providers[chosen];
        let t = std::ptr::addr_of!((*p).table);
        (
            std::ptr::addr_of!((*p).backendId).read(),
            std::ptr::addr_of!((*p).providerName).read(),
            std::ptr::addr_of!((*t).systemContextCreate).read(),
            std::ptr::addr_of!((*t).systemContextGetMetaData).read(),
            std::ptr::addr_of!((*t).systemContextGetBinaryInfo).read(),
            std::ptr::addr_of!((*t).systemContextFree).read(),
        )
    };
    let missing = |entry: &'static str| Error::MissingEntry {
        path: path.to_path_buf(),
        entry,
    };
    if get_metadata.is_none() && get_binary_info.is_none() {
        return Err(missing("systemContextGetMetaData"));
    }
    Ok(SystemLibrary {
        path: path.to_path_buf(),
        backend_id,
        // SAFETY: the provider name is NULL or a string inside the loaded library.
        provider_name: unsafe { lossy_string(provider_name) },
        system_api,
        fns: SystemFns {
            context_create: create.ok_or_else(|| missing("systemContextCreate"))?,
            context_get_metadata: get_metadata,
            context_get_binary_info: get_binary_info,
            context_free: free.ok_or_else(|| missing("systemContextFree"))?,
        },
        _library: library,
    })
}

/// The QnnProfile entries of a backend's table. The five the runtime cannot do without decide
/// whether the library can profile at all.
#[derive(Clone, Copy)]
pub(crate) struct ProfileFns {
    pub(crate) create: sys::QnnProfile_CreateFn,
    pub(crate) set_config: Option<sys::QnnProfile_SetConfigFn>,
    pub(crate) get_events: sys::QnnProfile_GetEventsFn,
    pub(crate) get_sub_events: sys::QnnProfile_GetSubEventsFn,
    pub(crate) get_event_data: sys::QnnProfile_GetEventDataFn,
    pub(crate) get_extended_event_data: Option<sys::QnnProfile_GetExtendedEventDataFn>,
    pub(crate) free: sys::QnnProfile_FreeFn,
}

type Entries3<A, B, C> = (Option<A>, Option<B>, Option<C>);

impl ProfileFns {
    pub(crate) fn from_entries(
        (create, set_config, get_events): Entries3<
            sys::QnnProfile_CreateFn,
            sys::QnnProfile_SetConfigFn,
            sys::QnnProfile_GetEventsFn,
        >,
        (get_sub_events, get_event_data): (
            Option<sys::QnnProfile_GetSubEventsFn>,
            Option<sys::QnnProfile_GetEventDataFn>,
        ),
        (get_extended_event_data, free): (
            Option<sys::QnnProfile_GetExtendedEventDataFn>,
            Option<sys::QnnProfile_FreeFn>,
        ),
    ) -> Option<ProfileFns> {
        Some(ProfileFns {
            create: create?,
            set_config,
            get_events: get_events?,
            get_sub_events: get_sub_events?,
            get_event_data: get_event_data?,
            get_extended_event_data,
            free: free?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chooses_highest_usable_minor() {
        let v = |minor| Version::new(2, minor, 0);
        assert_eq!(choose(&[v(10), v(32), v(20)], MIN_CORE_API), Some(1));
        assert_eq!(choose(&[v(17)], MIN_CORE_API), None);
        assert_eq!(choose(&[Version::new(3, 40, 0)], MIN_CORE_API), None);
        assert_eq!(choose(&[v(18), v(18)], MIN_CORE_API), Some(0));
        assert_eq!(choose(&[], MIN_CORE_API), None);
    }
}
