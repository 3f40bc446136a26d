//! Tensor metadata from QnnSystem: every version, and adversarial answers.

mod common;

use common::*;
use qnn::Site;
use qnn::sim_probe::configure;
use qnn::{Context, DataType, Quantization, Runtime};
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::{AdversarialKind, DType, Quant, TensorSpec};

fn logits_spec() -> TensorSpec {
    TensorSpec::new(DType::UFixed8, [1, 3]).quant(Quant::per_tensor(4.0 / 255.0, -128))
}

/// The classifier with a second, per-axis-quantized graph, reported with the given versions.
fn two_graph_model(binary_info: u32, graph_info: u32, tensor: u32) -> Vec<u8> {
    let per_axis = TensorSpec::new(DType::SFixed16, [2, 3]).quant(Quant::per_axis(
        1,
        vec![0.5, 0.25, 0.125],
        vec![1, -2, 3],
    ));
    ModelBuilder::new()
        .graph("first", |g| {
            let x = g.input("features", TensorSpec::f32([1, 4]));
            let y = g.relu("activated", x, TensorSpec::f32([1, 4]));
            g.output(y);
        })
        .graph("second", |g| {
            let x = g.input("x", per_axis.clone());
            let y = g.identity("y", x, per_axis.clone());
            g.output(y);
        })
        .metadata_versions(binary_info, graph_info, tensor)
        .build()
        .unwrap()
}

fn expected_graphs(context: &Context) {
    let graphs = context.graphs();
    assert_eq!(graphs.len(), 2);
    assert_eq!(graphs[0].name, "first");
    assert_eq!(graphs[0].inputs[0].name, "features");
    assert_eq!(graphs[0].inputs[0].data_type, DataType::Float32);
    assert_eq!(graphs[0].inputs[0].dims, vec![1, 4]);
    assert_eq!(graphs[0].inputs[0].byte_size, 16);
    assert_eq!(graphs[0].inputs[0].quantization, Quantization::None);
    assert_eq!(graphs[0].outputs[0].name, "activated");
    let second = &graphs[1];
    assert_eq!(second.name, "second");
    let x = &second.inputs[0];
    assert_eq!(x.data_type, DataType::SFixed16);
    assert_eq!(x.dims, vec![2, 3]);
    assert_eq!(x.byte_size, 12);
    assert_eq!(
        x.quantization,
        Quantization::PerAxis {
            axis: 1,
            scales: vec![0.5, 0.25, 0.125],
            offsets: vec![1, -2, 3],
            bitwidth: None
        }
    );
    assert_ne!(x.id, second.outputs[0].id);
}

#[test]
fn every_binary_graph_and_tensor_info_version_is_read() {
    let (lib, runtime) = runtime();
    for binary_info in 1..=3 {
        for graph_info in 1..=3 {
            for tensor in 1..=2 {
                let model = two_graph_model(binary_info, graph_info, tensor);
                let context =
                    Context::from_bytes(&runtime, &model, &Site::here()).unwrap_or_else(|e| {
                        panic!("versions {binary_info}/{graph_info}/{tensor}: {e}")
                    });
                expected_graphs(&context);
                // The described tensors are accepted by the backend's execute validation.
                let graph = qnn::Graph::retrieve(&context, "second", &Site::here()).unwrap();
                let input = [7u8; 12];
                let mut output = [0u8; 12];
                graph.execute(&[&input], &mut [&mut output]).unwrap();
                assert_eq!(output, input);
            }
        }
    }
    drop(runtime);
    assert_all_freed(&lib);
}

#[test]
fn system_api_1_1_uses_the_old_graph_info_stride() {
    let lib = fresh_library();
    configure(&lib, "system_providers", "1.1.0").unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    for graph_info in 1..=2 {
        let context =
            Context::from_bytes(&runtime, &two_graph_model(2, graph_info, 1), &Site::here())
                .unwrap();
        expected_graphs(&context);
    }
}

#[test]
fn bit_width_encodings_are_reported() {
    let (_lib, runtime) = runtime();
    let spec =
        TensorSpec::new(DType::UFixed8, [4]).quant(Quant::per_tensor(0.1, -8).with_bitwidth(4));
    let context = Context::from_bytes(&runtime, &identity_model(spec), &Site::here()).unwrap();
    let x = &context.graphs()[0].inputs[0];
    assert_eq!(
        x.quantization,
        Quantization::PerTensor {
            scale: 0.1,
            offset: -8,
            bitwidth: Some(4)
        }
    );
    assert_eq!(x.quantization.value_range(x.data_type), (0, 15));
}

/// Each adversarial answer becomes an `invalid_model` error whose message names the problem.
#[test]
fn adversarial_metadata_yields_errors() {
    let expectations: &[(AdversarialKind, &str)] = &[
        (AdversarialKind::NullGraphName, "graph 0 has a NULL name"),
        (AdversarialKind::NullTensorName, "input 0 has a NULL name"),
        (AdversarialKind::NonUtf8TensorName, "not UTF-8"),
        (AdversarialKind::ZeroDim, "of size 0"),
        (AdversarialKind::OverflowDims, "larger than 4 GiB"),
        (AdversarialKind::RankAbove8, "above the limit of 8"),
        (AdversarialKind::UnknownDtype, "unknown data type"),
        (AdversarialKind::NullDims, "but no dimensions"),
        (AdversarialKind::AxisCountMismatch, "scales for axis"),
        (AdversarialKind::AxisOutOfRange, "quantized along axis"),
        (AdversarialKind::ScaleZero, "finite and positive"),
        (AdversarialKind::ScaleNegative, "finite and positive"),
        (AdversarialKind::ScaleNan, "finite and positive"),
        (AdversarialKind::NullScaleOffset, "no scales"),
        (
            AdversarialKind::UnknownBinaryInfoVersion,
            "unknown binary info version",
        ),
        (
            AdversarialKind::UnknownGraphInfoVersion,
            "unknown graph info version",
        ),
        (
            AdversarialKind::UnknownTensorVersion,
            "unknown tensor version",
        ),
        (AdversarialKind::AbsurdNumGraphs, "above the limit of 1024"),
        (AdversarialKind::NullGraphs, "lists none"),
        (AdversarialKind::AbsurdNumInputs, "above the limit of 4096"),
        (AdversarialKind::NullInputs, "none are listed"),
        (AdversarialKind::AbsurdNumOutputs, "above the limit of 4096"),
        (AdversarialKind::NullOutputs, "none are listed"),
    ];
    let (lib, runtime) = runtime();
    let per_axis_input = TensorSpec::new(DType::UFixed8, [1, 3]).quant(Quant::per_axis(
        1,
        vec![0.1, 0.2, 0.3],
        vec![0, 0, 0],
    ));
    for (kind, needle) in expectations {
        let model = ModelBuilder::new()
            .graph("victim", |g| {
                let x = g.input("x", per_axis_input.clone());
                let y = g.identity("y", x, per_axis_input.clone());
                g.output(y);
            })
            .adversarial(*kind)
            .build()
            .unwrap();
        let err = Context::from_bytes(&runtime, &model, &Site::here()).unwrap_err();
        assert_eq!(err.reason(), "invalid_model", "{kind:?}: {err}");
        assert!(err.to_string().contains(needle), "{kind:?}: {err}");
    }
    // Nothing leaked on any error path.
    // log, backend, device, power config id
    assert_eq!(qnn::sim_probe::live_handles(&lib).unwrap(), 4);
    drop(runtime);
    assert_all_freed(&lib);
}

#[test]
fn unsupported_encodings_are_described_not_converted() {
    let (_lib, runtime) = runtime();
    let spec = TensorSpec::new(DType::UFixed8, [1, 3]).quant(Quant::per_tensor(0.1, 0));
    let model = ModelBuilder::new()
        .graph("blocky", |g| {
            let x = g.input("x", spec.clone());
            let y = g.identity("y", x, spec.clone());
            g.output(y);
        })
        .adversarial(AdversarialKind::BlockEncoding)
        .build()
        .unwrap();
    let context = Context::from_bytes(&runtime, &model, &Site::here()).unwrap();
    let x = &context.graphs()[0].inputs[0];
    assert_eq!(
        x.quantization,
        Quantization::Unsupported { encoding: "block" }
    );
    assert!(!x.f32_conversion());
}

#[test]
fn corrupt_binaries_are_errors() {
    let (lib, runtime) = runtime();
    let model = Classifier::new(logits_spec()).model();

    let err = Context::from_bytes(&runtime, &[], &Site::here()).unwrap_err();
    assert_eq!(err.reason(), "invalid_model");
    assert!(err.to_string().contains("empty"), "{err}");

    for cut in [1, 8, 16, model.len() / 2, model.len() - 1] {
        let err = Context::from_bytes(&runtime, &model[..cut], &Site::here()).unwrap_err();
        assert_eq!(err.reason(), "qnn_error", "cut at {cut}: {err}");
        assert_eq!(
            err.qnn_code(),
            Some(qnn::sys::QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY)
        );
    }
    let mut flipped = model.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    let err = Context::from_bytes(&runtime, &flipped, &Site::here()).unwrap_err();
    assert!(
        err.to_string().contains("systemContextGetMetaData failed"),
        "{err}"
    );

    let err = Context::from_file(
        &runtime,
        std::path::Path::new("/nonexistent/model.bin"),
        &Site::here(),
    )
    .unwrap_err();
    assert_eq!(err.reason(), "io");
    assert!(err.to_string().contains("/nonexistent/model.bin"), "{err}");
    drop(runtime);
    assert_all_freed(&lib);
}

#[test]
fn context_creation_failure_is_reported() {
    let (lib, runtime) = runtime();
    let spec = TensorSpec::f32([2]);
    let model = ModelBuilder::new()
        .graph("g", |g| {
            let x = g.input("x", spec.clone());
            let y = g.identity("y", x, spec.clone());
            g.output(y);
        })
        .fail_context_create(qnn_sim::model::Fault::once(
            qnn::sys::QNN_CONTEXT_ERROR_BINARY_CONFIGURATION,
        ))
        .build()
        .unwrap();
    let err = Context::from_bytes(&runtime, &model, &Site::here()).unwrap_err();
    assert_eq!(err.qnn_code(), Some(5008));
    assert!(
        err.to_string()
            .contains("contextCreateFromBinary failed with QNN_CONTEXT_ERROR_BINARY_CONFIGURATION"),
        "{err}"
    );
    // Once: the second load succeeds.
    let context = Context::from_bytes(&runtime, &model, &Site::here()).unwrap();
    assert_eq!(context.graphs()[0].name, "g");
    drop((context, runtime));
    assert_all_freed(&lib);
}

#[test]
fn files_load_and_remember_their_source() {
    let (_lib, runtime) = runtime();
    let dir = std::env::temp_dir().join(format!("qnn-metadata-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("classifier.bin");
    std::fs::write(&path, Classifier::new(logits_spec()).model()).unwrap();
    let context = Context::from_file(&runtime, &path, &Site::here()).unwrap();
    assert_eq!(context.source(), Some(path.as_path()));
    assert_eq!(context.graphs()[0].name, "classifier");
    std::fs::remove_dir_all(&dir).unwrap();
}
