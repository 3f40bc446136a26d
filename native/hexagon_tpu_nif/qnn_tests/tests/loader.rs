//! Opening libraries and negotiating providers.

mod common;

use std::path::PathBuf;

use common::*;
use qnn::Site;
use qnn::sim_probe::configure;
use qnn::{Runtime, RuntimeConfig, Version};

#[test]
fn missing_library_names_the_path_and_dlerror() {
    let path = PathBuf::from("/nonexistent/dir/libQnnHtp.so");
    let err = Runtime::new(
        &RuntimeConfig {
            backend_lib: path.clone(),
            system_lib: path.clone(),
            rpcmem_lib: qnn::shared::DEFAULT_RPCMEM_LIB.into(),
            log_level: None,
            performance: Default::default(),
        },
        &Site::here(),
    )
    .unwrap_err();
    assert_eq!(err.reason(), "library_not_found");
    let message = err.to_string();
    assert!(message.contains("backend library"), "{message}");
    assert!(
        message.contains("/nonexistent/dir/libQnnHtp.so"),
        "{message}"
    );
    assert!(message.contains("No such file or directory"), "{message}");
}

#[test]
fn missing_system_library_is_reported_as_such() {
    let lib = fresh_library();
    let err = Runtime::new(
        &RuntimeConfig {
            backend_lib: lib.clone(),
            system_lib: PathBuf::from("/nonexistent/libQnnSystem.so"),
            rpcmem_lib: qnn::shared::DEFAULT_RPCMEM_LIB.into(),
            log_level: None,
            performance: Default::default(),
        },
        &Site::here(),
    )
    .unwrap_err();
    assert_eq!(err.reason(), "library_not_found");
    assert!(err.to_string().contains("system library"), "{err}");
    assert_all_freed(&lib);
}

#[test]
fn a_library_without_the_entry_point_is_named() {
    // libm is present everywhere the tests run and exports no QNN symbols.
    let libm = PathBuf::from("libm.so.6");
    let err = Runtime::new(
        &RuntimeConfig {
            backend_lib: libm.clone(),
            system_lib: libm,
            rpcmem_lib: qnn::shared::DEFAULT_RPCMEM_LIB.into(),
            log_level: None,
            performance: Default::default(),
        },
        &Site::here(),
    )
    .unwrap_err();
    assert_eq!(err.reason(), "missing_symbol");
    assert!(
        err.to_string().contains("QnnInterface_getProviders"),
        "{err}"
    );
}

#[test]
fn the_highest_acceptable_core_provider_is_chosen() {
    let lib = fresh_library();
    configure(&lib, "core_providers", "2.10.0;2.32.1;2.20.0;3.0.0").unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    assert_eq!(runtime.info().core_api, Version::new(2, 32, 1));
    runtime.close().unwrap();
    assert_all_freed(&lib);
}

#[test]
fn the_oldest_supported_core_minor_is_accepted() {
    let lib = fresh_library();
    configure(&lib, "core_providers", "2.18.0").unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    assert_eq!(runtime.info().core_api, Version::new(2, 18, 0));
    runtime.close().unwrap();
}

/// qnn_sim ends every provider where its minor says it ends, right before an
/// inaccessible page (a 2.18 core provider is 536 bytes of our 608, a System 1.1 provider 64 of
/// 160): reading an entry the minor does not guarantee, or copying a provider whole, would crash
/// this test.
#[test]
fn providers_are_read_only_as_far_as_their_minor_guarantees() {
    let lib = fresh_library();
    configure(&lib, "core_providers", "2.18.0").unwrap();
    configure(&lib, "system_providers", "1.1.0").unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    let (_context, graph) = load(&runtime, &Classifier::new(logits_spec()).model());
    let info = graph.info().clone();
    let x = vec![0u8; info.inputs[0].byte_size];
    let mut logits = vec![0u8; info.outputs[0].byte_size];
    let mut probs = vec![0u8; info.outputs[1].byte_size];
    graph
        .execute(&[&x], &mut [&mut logits, &mut probs])
        .unwrap();
}

#[test]
fn incompatible_core_providers_are_rejected_with_what_was_offered() {
    for offered in ["2.17.0", "3.1.0", "1.40.0", "2.10.0;3.0.0"] {
        let lib = fresh_library();
        configure(&lib, "core_providers", offered).unwrap();
        let err = Runtime::new(&config(&lib), &Site::here()).unwrap_err();
        assert_eq!(err.reason(), "incompatible_api", "{offered}");
        let message = err.to_string();
        for version in offered.split(';') {
            assert!(message.contains(version), "{offered}: {message}");
        }
        assert!(message.contains("core API 2.x with x >= 18"), "{message}");
        assert_all_freed(&lib);
    }
}

#[test]
fn a_library_offering_no_providers_is_rejected() {
    let lib = fresh_library();
    configure(&lib, "core_providers", "").unwrap();
    let err = Runtime::new(&config(&lib), &Site::here()).unwrap_err();
    assert_eq!(err.reason(), "incompatible_api");
    assert!(err.to_string().contains("no providers"), "{err}");
}

#[test]
fn system_providers_are_negotiated_too() {
    let lib = fresh_library();
    configure(&lib, "system_providers", "1.2.0;1.3.0").unwrap();
    let err = Runtime::new(&config(&lib), &Site::here()).unwrap_err();
    assert_eq!(err.reason(), "incompatible_api");
    assert!(err.to_string().contains("1.2.0, 1.3.0"), "{err}");

    let lib = fresh_library();
    configure(&lib, "system_providers", "1.3.0;1.7.0").unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    assert_eq!(runtime.info().system_api, Version::new(1, 7, 0));
}

#[test]
fn a_null_required_entry_is_named() {
    let lib = fresh_library();
    configure(&lib, "null_entries", "graphExecute").unwrap();
    let err = Runtime::new(&config(&lib), &Site::here()).unwrap_err();
    assert_eq!(err.reason(), "missing_entry");
    assert!(err.to_string().contains("graphExecute"), "{err}");
}

#[test]
fn optional_entries_may_be_null() {
    let lib = fresh_library();
    configure(
        &lib,
        "null_entries",
        "logCreate,logFree,deviceCreate,deviceFree,backendGetBuildId,errorGetMessage",
    )
    .unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    assert_eq!(runtime.info().build_id, "");
    runtime.close().unwrap();
    assert_all_freed(&lib);
}

#[test]
fn backend_creation_failure_frees_what_was_created() {
    let lib = fresh_library();
    configure(&lib, "fail_backend_create", "4000").unwrap();
    let err = Runtime::new(&config(&lib), &Site::here()).unwrap_err();
    assert_eq!(err.qnn_code(), Some(4000));
    assert!(
        err.to_string()
            .contains("QNN_BACKEND_ERROR_CANNOT_INITIALIZE"),
        "{err}"
    );
    assert_all_freed(&lib);
}

#[test]
fn a_backend_without_devices_still_works() {
    let lib = fresh_library();
    configure(&lib, "fail_device_create", "1000").unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    let (_context, graph) = load(&runtime, &Classifier::new(logits_spec()).model());
    assert_eq!(graph.name(), "classifier");
}

#[test]
fn a_failing_device_is_an_error() {
    let lib = fresh_library();
    configure(&lib, "fail_device_create", "14002").unwrap();
    let err = Runtime::new(&config(&lib), &Site::here()).unwrap_err();
    assert!(
        err.to_string()
            .contains("deviceCreate failed with QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE"),
        "{err}"
    );
    assert_all_freed(&lib);
}

#[test]
fn error_codes_are_the_low_16_bits() {
    let lib = fresh_library();
    configure(&lib, "error_high_bits", "on").unwrap();
    configure(&lib, "fail_backend_create", "4000").unwrap();
    let err = Runtime::new(&config(&lib), &Site::here()).unwrap_err();
    assert_eq!(err.qnn_code(), Some(4000));
}

#[test]
fn info_reports_the_backend() {
    let lib = fresh_library();
    configure(&lib, "build_id", "v9.9.9-test").unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    let info = runtime.info();
    assert_eq!(info.build_id, "v9.9.9-test");
    assert_eq!(info.backend_lib, lib);
    assert_eq!(info.core_api.major, 2);
    assert_eq!(info.system_api.major, 1);
}

fn logits_spec() -> qnn_sim::model::TensorSpec {
    use qnn_sim::model::{DType, Quant, TensorSpec};
    TensorSpec::new(DType::UFixed8, [1, 3]).quant(Quant::per_tensor(4.0 / 255.0, -128))
}
