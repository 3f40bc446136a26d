//! `qnn::inspect` on qnn_sim: library and binary information without a runtime,
//! and the backend probe, which tries every step and frees what it created.

mod common;

use common::*;
use qnn::Site;
use qnn::inspect;
use qnn::sim_probe::configure;
use qnn::{DataType, Error, LogLevel};
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::TensorSpec;

#[test]
fn libraries_report_their_providers() {
    let lib = fresh_library();
    configure(&lib, "provider_name", "HOST_TEST").unwrap();
    configure(&lib, "system_provider_name", "HOST_SYSTEM_TEST").unwrap();
    configure(&lib, "build_id", "v1.2.3-inspect").unwrap();
    configure(&lib, "backend_api", "5.7.1").unwrap();
    let backend = inspect::backend_library(&lib).unwrap();
    assert_eq!(backend.path, lib);
    assert_eq!(backend.provider_name, "HOST_TEST");
    assert_eq!(backend.build_id, "v1.2.3-inspect");
    assert_eq!(backend.backend_api, qnn::Version::new(5, 7, 1));
    assert_eq!(backend.core_api.major, 2);
    let system = inspect::system_library(&lib).unwrap();
    assert_eq!(system.provider_name, "HOST_SYSTEM_TEST");
    assert_eq!(system.system_api.major, 1);
    // Nothing was created.
    assert_all_freed(&lib);
}

#[test]
fn binary_info_reads_every_version_with_the_system_library_alone() {
    let lib = fresh_library();
    for version in 1..=3 {
        let model = ModelBuilder::new()
            .graph("g", |g| {
                let x = g.input("x", TensorSpec::f32([2, 3]));
                let y = g.relu("y", x, TensorSpec::f32([2, 3]));
                g.output(y);
            })
            .soc_version("test-soc")
            .metadata_versions(version, 3, 2)
            .build()
            .unwrap();
        let info = inspect::binary_info(&lib, &model).unwrap();
        assert_eq!(info.version, version);
        assert_eq!(info.soc_version, "test-soc");
        // Only BinaryInfo v3 has a SoC model (qnn_sim reports 0).
        assert_eq!(info.soc_model, (version == 3).then_some(0));
        assert!(info.build_id.starts_with("qnn_sim v"), "{}", info.build_id);
        assert_eq!(info.graphs.len(), 1);
        assert_eq!(info.graphs[0].name, "g");
        assert_eq!(info.graphs[0].inputs[0].data_type, DataType::Float32);
        assert_eq!(info.graphs[0].outputs[0].dims, vec![2, 3]);
    }
    let empty = inspect::binary_info(&lib, &[]).unwrap_err();
    assert_eq!(empty.reason(), "invalid_model", "{empty}");
    assert_all_freed(&lib);
}

#[test]
fn probe_creates_and_frees_every_handle() {
    let lib = fresh_library();
    let probe = inspect::probe_backend(&lib, Some(LogLevel::Warn)).unwrap();
    assert!(matches!(probe.log_create, Some(Ok(()))), "{probe:?}");
    assert!(probe.backend_create.is_ok(), "{probe:?}");
    assert!(matches!(probe.device_create, Some(Ok(()))), "{probe:?}");
    // qnn_sim answers deviceGetPlatformInfo with NOT_SUPPORTED unless told of a device.
    let error = probe
        .device_platform_info
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap_err();
    assert_eq!(error.qnn_code(), Some(1000), "{probe:?}");
    assert_all_freed(&lib);

    qnn::sim_probe::configure(
        &lib,
        "device_platform",
        "soc_model=35,htp_arch=68,vtcm_mb=8",
    )
    .unwrap();
    let probe = inspect::probe_backend(&lib, None).unwrap();
    let devices = probe.device_platform_info.unwrap().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].htp.soc_model, Some(35));
    assert_eq!(devices[0].htp.dsp_arch, Some(68));
    assert_eq!(devices[0].htp.vtcm_size, Some(8 << 20));
    // the platform info was freed with the rest
    assert_all_freed(&lib);

    let without_log = inspect::probe_backend(&lib, None).unwrap();
    assert!(without_log.log_create.is_none());
    assert!(without_log.backend_create.is_ok());
    assert_all_freed(&lib);
}

#[test]
fn probe_tries_the_device_after_the_backend_fails() {
    let lib = fresh_library();
    configure(&lib, "fail_backend_create", "4000").unwrap();
    configure(&lib, "fail_device_create", "14002").unwrap();
    let probe = inspect::probe_backend(&lib, Some(LogLevel::Error)).unwrap();
    assert!(matches!(probe.log_create, Some(Ok(()))), "{probe:?}");
    let backend = probe.backend_create.unwrap_err();
    assert_eq!(backend.qnn_code(), Some(4000));
    // The library's own text (errorGetMessage) follows QNN's name for the code.
    assert_eq!(
        backend.to_string(),
        "backendCreate failed with QNN_BACKEND_ERROR_CANNOT_INITIALIZE (4000): \
         QNN_BACKEND_ERROR_CANNOT_INITIALIZE (4000) reported by qnn_sim"
    );
    let device = probe.device_create.unwrap().unwrap_err();
    assert!(
        matches!(&device, Error::Qnn { op: "deviceCreate", code: 14002, name: "QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE", detail: Some(d) } if d.contains("reported by qnn_sim")),
        "{device:?}"
    );
    assert_all_freed(&lib);
}

#[test]
fn every_failed_backend_call_carries_the_librarys_text() {
    let lib = fresh_library();
    // QNN_CONTEXT_ERROR_MEM_ALLOC, the context family's name for the common code 1002.
    let code = qnn::sys::QNN_CONTEXT_ERROR_MEM_ALLOC;
    configure(&lib, "fail_context_create", &code.to_string()).unwrap();
    let runtime = qnn::Runtime::new(&config(&lib), &Site::here()).unwrap();
    let model = identity_model(TensorSpec::f32([4]));
    let err = qnn::Context::from_bytes(&runtime, &model, &Site::here()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "contextCreateFromBinary failed with QNN_COMMON_ERROR_MEM_ALLOC (1002): \
         QNN_COMMON_ERROR_MEM_ALLOC (1002) reported by qnn_sim"
    );
    runtime.close().unwrap();
    assert_all_freed(&lib);
}
