//! Library-wide knobs (`QnnSim_configure`): providers, NULL entries, creation failures.

mod common;
mod models;

use common::*;
use qnn_sys::*;

fn versions(sim: &Sim) -> Vec<(u32, u32, u32)> {
    sim.providers()
        .iter()
        .map(|p| {
            (
                p.apiVersion.coreApiVersion.major,
                p.apiVersion.coreApiVersion.minor,
                p.apiVersion.coreApiVersion.patch,
            )
        })
        .collect()
}

#[test]
fn default_providers() {
    let sim = Sim::load();
    let p = sim.providers();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].backendId, QNN_BACKEND_ID_HTP);
    assert_eq!(
        (
            p[0].apiVersion.backendApiVersion.major,
            p[0].apiVersion.backendApiVersion.minor
        ),
        (5, 43)
    );
    // SAFETY: the provider name is a static C string.
    let name = unsafe { std::ffi::CStr::from_ptr(p[0].providerName) };
    assert_eq!(name.to_str().unwrap(), "QNN_SIM");
    let t = p[0].table;
    assert!(t.graphExecute.is_some() && t.errorGetMessage.is_some() && t.contextCreate.is_none());
    let s = sim.system_providers();
    assert_eq!(
        (s[0].systemApiVersion.major, s[0].systemApiVersion.minor),
        (1, 7)
    );
    assert!(s[0].table.systemContextGetMetaData.is_some() && s[0].table.systemDlcFree.is_none());
}

#[test]
fn provider_lists_and_old_pointers_stay_valid() {
    let sim = Sim::load();
    let first = sim.providers();
    assert_eq!(sim.configure("core_providers", "2.10.0;2.32.0;3.0.0"), 0);
    assert_eq!(versions(&sim), [(2, 10, 0), (2, 32, 0), (3, 0, 0)]);
    let p = sim.providers();
    assert!(
        p[0].table.backendCreate.is_none(),
        "a pre-2.18 provider offers nothing usable"
    );
    assert!(p[1].table.backendCreate.is_some());
    assert_eq!(sim.configure("core_providers", "2.20"), 0);
    assert_eq!(versions(&sim), [(2, 20, 0)]);
    assert_eq!(first[0].apiVersion.coreApiVersion.minor, 32);
    assert_eq!(sim.configure("core_providers", ""), 0);
    assert!(sim.providers().is_empty());
    assert_eq!(sim.configure("reset", ""), 0);
    assert_eq!(versions(&sim), [(2, 32, 0)]);
}

#[test]
fn null_entries_and_bad_configuration() {
    let sim = Sim::load();
    assert_eq!(
        sim.configure("null_entries", "graphExecute, systemContextGetMetaData"),
        0
    );
    assert!(sim.core().graphExecute.is_none());
    assert!(sim.core().graphRetrieve.is_some());
    assert!(sim.sys().systemContextGetMetaData.is_none());
    assert!(sim.sys().systemContextGetBinaryInfo.is_some());
    assert_eq!(sim.configure("null_entries", "noSuchEntry"), 2);
    assert_eq!(sim.configure("no_such_key", "1"), 1);
    assert_eq!(sim.configure("core_providers", "two.three"), 2);
    assert_eq!(sim.configure("fail_device_create", "70000"), 2);
    assert_eq!(sim.configure("null_entries", ""), 0);
    assert!(sim.core().graphExecute.is_some());
}

#[test]
fn creation_failures() {
    let sim = Sim::load();
    let t = sim.core();
    assert_eq!(sim.configure("fail_backend_create", "4000"), 0);
    assert_eq!(sim.configure("fail_device_create", "1000"), 0);
    let mut log = std::ptr::null_mut();
    let mut b = std::ptr::null_mut();
    let mut d = std::ptr::null_mut();
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(
            t.logCreate.unwrap()(std::ptr::null(), QNN_LOG_LEVEL_ERROR, &mut log),
            0
        );
        assert_eq!(
            code(t.backendCreate.unwrap()(log, std::ptr::null(), &mut b)),
            QNN_BACKEND_ERROR_CANNOT_INITIALIZE
        );
        assert_eq!(
            code(t.deviceCreate.unwrap()(log, std::ptr::null(), &mut d)),
            QNN_COMMON_ERROR_NOT_SUPPORTED
        );
        assert_eq!(sim.configure("fail_backend_create", "none"), 0);
        assert_eq!(t.backendCreate.unwrap()(log, std::ptr::null(), &mut b), 0);
    }
    // A NULL device is accepted by contextCreateFromBinary.
    let s = Session {
        log,
        backend: b,
        device: std::ptr::null_mut(),
    };
    let bytes = models::identity_f32("g", 1).build().unwrap();
    assert_eq!(sim.configure("fail_context_create", "5008"), 0);
    assert_eq!(
        sim.create_context(&s, &bytes).unwrap_err(),
        QNN_CONTEXT_ERROR_BINARY_CONFIGURATION
    );
    assert_eq!(sim.configure("fail_context_create", ""), 0);
    let ctx = sim.create_context(&s, &bytes).unwrap();
    assert_eq!(sim.free_context(ctx), 0);
    // SAFETY: handles freed once, in order.
    unsafe {
        assert_eq!(t.backendFree.unwrap()(b), 0);
        assert_eq!(t.logFree.unwrap()(log), 0);
    }
    assert_eq!(sim.live(), 0);
}

#[test]
fn backend_api_knob() {
    let sim = Sim::load();
    assert_eq!(sim.configure("backend_api", "5.20.1"), 0);
    assert_eq!(sim.configure("core_providers", "2.18.0"), 0);
    let mut v = Qnn_ApiVersion_t::default();
    // SAFETY: valid out-pointer.
    let rc = unsafe { sim.core().backendGetApiVersion.unwrap()(&mut v) };
    assert_eq!(rc, 0);
    assert_eq!(
        (
            v.coreApiVersion.minor,
            v.backendApiVersion.minor,
            v.backendApiVersion.patch
        ),
        (18, 20, 1)
    );
}
