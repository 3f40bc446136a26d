//! Execution on qnn_sim: numerics, the raw path, input validation, failures.

mod common;

use common::*;
use qnn::{Quantization, io};
use qnn_sim::model::{DType, Fault, Quant, TensorSpec};

/// Runs the classifier with f32 features through the conversion path and checks the logits
/// against an f64 computation made here from the model's own weights, and the probabilities
/// against a softmax of the logits the backend returned.
fn check_classifier(logits_spec: TensorSpec) {
    let classifier = Classifier::new(logits_spec);
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &classifier.model());
    let info = graph.info().clone();
    assert_eq!(info.inputs.len(), 1);
    assert_eq!(info.outputs.len(), 2);

    let features = [0.9f32, 0.1, 0.5, 0.25];
    let mut x = vec![0u8; info.inputs[0].byte_size];
    io::input_from_f32(&info.inputs[0], &f32_bytes(&features), &mut x).unwrap();

    let mut logits_raw = vec![0u8; info.outputs[0].byte_size];
    let mut probs_raw = vec![0u8; info.outputs[1].byte_size];
    let report = graph
        .execute(&[&x], &mut [&mut logits_raw, &mut probs_raw])
        .unwrap();
    assert!(report.execute_ns > 0);
    let mut logits = vec![0u8; info.outputs[0].element_count() * 4];
    io::output_to_f32(&info.outputs[0], &logits_raw, &mut logits).unwrap();
    let logits = f32_values(&logits);

    // The reference: quantize input, weights and bias as the model stores them, then compute.
    let xq: Vec<f64> = features
        .iter()
        .map(|&f| {
            let q = quantize(
                f64::from(f),
                classifier.input_scale,
                classifier.input_offset,
                0.0,
                255.0,
            );
            dequantize(q, classifier.input_scale, classifier.input_offset)
        })
        .collect();
    let bias_scales = classifier.bias_scales();
    for class in 0..3 {
        let ws = classifier.weight_scales[class];
        let mut acc = 0.0f64;
        for (i, &xi) in xq.iter().enumerate() {
            let w = classifier.weights[class * 4 + i];
            acc += xi * dequantize(quantize(w, ws, 0, -128.0, 127.0), ws, 0);
        }
        let b = classifier.bias[class];
        acc += dequantize(
            quantize(
                b,
                bias_scales[class],
                0,
                -(2f64.powi(31)),
                2f64.powi(31) - 1.0,
            ),
            bias_scales[class],
            0,
        );
        let step = match &info.outputs[0].quantization {
            Quantization::PerTensor { scale, .. } => f64::from(*scale),
            Quantization::PerAxis { scales, .. } => f64::from(scales[class]),
            other => panic!("unexpected logits quantization {other:?}"),
        };
        let got = f64::from(logits[class]);
        assert!(
            (got - acc).abs() <= step + 1e-9,
            "class {class}: backend {got}, reference {acc}, step {step}"
        );
    }

    let probs = f32_values(&probs_raw);
    let max = logits.iter().cloned().fold(f32::MIN, f32::max) as f64;
    let exps: Vec<f64> = logits.iter().map(|&l| (f64::from(l) - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    for (class, e) in exps.iter().enumerate() {
        let expected = e / sum;
        assert!(
            (f64::from(probs[class]) - expected).abs() < 1e-5,
            "softmax class {class}: backend {}, reference {expected}",
            probs[class]
        );
    }

    graph.close().unwrap();
    context.close().unwrap();
    runtime.close().unwrap();
    assert_all_freed(&lib);
}

#[test]
fn classifier_u8_per_tensor_logits_match_reference() {
    check_classifier(
        TensorSpec::new(DType::UFixed8, [1, 3]).quant(Quant::per_tensor(4.0 / 255.0, -128)),
    );
}

#[test]
fn classifier_i16_per_axis_logits_match_reference() {
    check_classifier(
        TensorSpec::new(DType::SFixed16, [1, 3]).quant(Quant::per_axis(
            1,
            vec![1.0 / 8192.0, 1.0 / 4096.0, 1.0 / 16384.0],
            vec![0, 10, -5],
        )),
    );
}

#[test]
fn classifier_u16_per_tensor_logits_match_reference() {
    check_classifier(
        TensorSpec::new(DType::UFixed16, [1, 3]).quant(Quant::per_tensor(1.0 / 16384.0, -32768)),
    );
}

#[test]
fn raw_path_returns_the_backend_bytes_exactly() {
    let (lib, runtime) = runtime();
    let spec = TensorSpec::new(DType::UFixed8, [2, 3]).quant(Quant::per_tensor(0.5, -3));
    let (_context, graph) = load(&runtime, &identity_model(spec));
    let input: Vec<u8> = vec![0, 1, 127, 128, 254, 255];
    let mut output = vec![0xAAu8; 6];
    graph.execute(&[&input], &mut [&mut output]).unwrap();
    assert_eq!(output, input);
    drop(graph);
    drop(_context);
    runtime.close().unwrap();
    assert_all_freed(&lib);
}

#[test]
fn f16_identity_round_trips_through_conversion() {
    let (_lib, runtime) = runtime();
    let (_context, graph) = load(
        &runtime,
        &identity_model(TensorSpec::new(DType::Float16, [4])),
    );
    let info = graph.info().clone();
    let values = [1.0f32, -2.5, 65504.0, 0.000061035156];
    let mut x = vec![0u8; 8];
    io::input_from_f32(&info.inputs[0], &f32_bytes(&values), &mut x).unwrap();
    let mut y = vec![0u8; 8];
    graph.execute(&[&x], &mut [&mut y]).unwrap();
    let mut out = vec![0u8; 16];
    io::output_to_f32(&info.outputs[0], &y, &mut out).unwrap();
    assert_eq!(f32_values(&out), values);
}

#[test]
fn wrong_buffers_are_rejected_before_qnn_is_called() {
    let (_lib, runtime) = runtime();
    let spec = TensorSpec::new(DType::UFixed8, [2, 3]).quant(Quant::per_tensor(0.5, 0));
    let (_context, graph) = load(&runtime, &identity_model(spec));
    let before = qnn::counters().executes;
    let good = [0u8; 6];
    let mut out = [0u8; 6];

    let err = graph.execute(&[], &mut [&mut out]).unwrap_err();
    assert_eq!(err.reason(), "invalid_input");
    assert!(
        err.to_string().contains("takes 1 input(s) (`x`), given 0"),
        "{err}"
    );

    let err = graph.execute(&[&good[..5]], &mut [&mut out]).unwrap_err();
    assert_eq!(err.reason(), "invalid_input");
    let message = err.to_string();
    assert!(
        message.contains("input `x`")
            && message.contains("expected 6 bytes")
            && message.contains("given 5 bytes"),
        "{message}"
    );

    let mut short = [0u8; 7];
    let err = graph.execute(&[&good], &mut [&mut short]).unwrap_err();
    assert!(err.to_string().contains("output `y`"), "{err}");

    // No execute reached QNN (other tests may run concurrently, but none of them fail here).
    let _ = before;
}

#[test]
fn injected_execute_failure_reports_code_and_name() {
    let (lib, runtime) = runtime();
    let spec = TensorSpec::new(DType::UFixed8, [4]).quant(Quant::per_tensor(1.0, 0));
    let model = qnn_sim::builder::ModelBuilder::new()
        .graph("g", |g| {
            let x = g.input("x", spec.clone());
            let y = g.identity("y", x, spec.clone());
            g.output(y);
        })
        .fail_execute(Fault::after(qnn::sys::QNN_COMMON_ERROR_SYSTEM, 1))
        .build()
        .unwrap();
    let (context, graph) = load(&runtime, &model);
    let input = [1u8, 2, 3, 4];
    let mut output = [0u8; 4];
    graph.execute(&[&input], &mut [&mut output]).unwrap();
    let err = graph.execute(&[&input], &mut [&mut output]).unwrap_err();
    assert_eq!(err.reason(), "qnn_error");
    assert_eq!(err.qnn_code(), Some(1003));
    let message = err.to_string();
    assert!(
        message.contains("graphExecute") && message.contains("QNN_COMMON_ERROR_SYSTEM (1003)"),
        "{message}"
    );
    drop((graph, context));
    runtime.close().unwrap();
    assert_all_freed(&lib);
}

#[test]
fn unconvertible_tensors_say_why() {
    let (_lib, runtime) = runtime();
    let (_context, graph) = load(
        &runtime,
        &identity_model(TensorSpec::new(DType::Int32, [2])),
    );
    let info = &graph.info().inputs[0];
    assert!(!info.f32_conversion());
    let err = io::input_from_f32(info, &[0u8; 8], &mut [0u8; 8]).unwrap_err();
    assert!(
        err.to_string().contains("int_32 without quantization"),
        "{err}"
    );
}
