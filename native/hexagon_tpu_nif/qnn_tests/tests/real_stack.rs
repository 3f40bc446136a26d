//! Against Qualcomm's own QNN libraries (QAIRT 2.51 from PyPI's `onnxruntime-qnn` 2.7.0 wheels),
//! not the project's qnn_sim. Nothing of Qualcomm's is in this repository: the tests run
//! when the environment names the libraries and a context binary made at test time, and say
//! that they were skipped otherwise.
//!
//! - `QNN_REAL_SYSTEM_LIB`: `libQnnSystem.so`.
//! - `QNN_REAL_BACKEND_LIB`: `libQnnHtp.so`.
//! - `QNN_REAL_BACKEND_KIND`: what the backend must do when brought up: `works` (the x86-64
//!   wheel's HTP emulator, or a board with its DSP) or `no-dsp` (the aarch64 wheel's device
//!   runtime where there is no Snapdragon, e.g. under qemu-aarch64).
//! - `QNN_REAL_CONTEXT_BINARY`: the binary `tests/real_stack_model.py` writes
//!   (`real_stack_ctx_qnn.bin`); the `real_stack.graph` beside it holds the graph name ORT gave.
//!
//! Each test writes `real_stack: checked <test>` or `real_stack: skipped <test>` to stderr
//! (past the test harness's capture, so a skip shows in a plain `cargo test`), and appends the
//! same line to the file `QNN_REAL_REPORT` names, if any. `.ci/aarch64.sh` runs these under qemu
//! on the aarch64 wheel's libraries and natively on the x86-64 wheel's, and fails unless every
//! test of this file reports `checked`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use qnn::Site;
use qnn::inspect::{self, BackendProbe};
use qnn::{Context, DataType, Error, Graph, Quantization, Runtime, RuntimeConfig, TensorInfo};

/// The QAIRT release inside onnxruntime-qnn 2.7.0.
const BUILD_ID: &str = "v2.51.0.260929181845";
const QNN_BACKEND_ID_HTP: u32 = 6;
/// `soc_model` 35 is the QCS6490 the generator compiles for.
const SOC_MODEL_QCS6490: u32 = 35;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BackendKind {
    Works,
    NoDsp,
}

struct Stack {
    system_lib: PathBuf,
    backend_lib: PathBuf,
    kind: BackendKind,
    binary: PathBuf,
    graph_name: String,
}

/// The libraries and binary the environment names, or `None` (printed) when it names none.
/// Naming only some of them is a configuration error, not a skip.
fn stack(test: &str) -> Option<Stack> {
    const VARS: [&str; 4] = [
        "QNN_REAL_SYSTEM_LIB",
        "QNN_REAL_BACKEND_LIB",
        "QNN_REAL_BACKEND_KIND",
        "QNN_REAL_CONTEXT_BINARY",
    ];
    let values: Vec<Option<String>> = VARS
        .iter()
        .map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .collect();
    if values.iter().all(Option::is_none) {
        report(&format!(
            "skipped {test}: set {} to run it against Qualcomm's libraries",
            VARS.join(", ")
        ));
        return None;
    }
    let missing: Vec<&str> = VARS
        .iter()
        .zip(&values)
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| *n)
        .collect();
    assert!(
        missing.is_empty(),
        "real_stack: some variables are set but not {}",
        missing.join(", ")
    );
    let [system_lib, backend_lib, kind, binary] =
        <[Option<String>; 4]>::try_from(values).expect("four values");
    let kind = match kind.as_deref() {
        Some("works") => BackendKind::Works,
        Some("no-dsp") => BackendKind::NoDsp,
        other => panic!("QNN_REAL_BACKEND_KIND must be `works` or `no-dsp`, not {other:?}"),
    };
    let binary = PathBuf::from(binary.expect("checked"));
    let graph_file = binary.with_file_name("real_stack.graph");
    let graph_name = std::fs::read_to_string(&graph_file)
        .unwrap_or_else(|e| panic!("{}: {e}", graph_file.display()))
        .trim()
        .to_string();
    Some(Stack {
        system_lib: PathBuf::from(system_lib.expect("checked")),
        backend_lib: PathBuf::from(backend_lib.expect("checked")),
        kind,
        binary,
        graph_name,
    })
}

fn checked(test: &str) {
    report(&format!("checked {test}"));
}

/// Writes `real_stack: <line>` to the process's stderr (not the harness's captured `eprintln!`)
/// and to `QNN_REAL_REPORT`.
fn report(line: &str) {
    let line = format!("real_stack: {line}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os("QNN_REAL_REPORT") {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("QNN_REAL_REPORT {}: {e}", path.to_string_lossy()));
        file.write_all(line.as_bytes())
            .unwrap_or_else(|e| panic!("QNN_REAL_REPORT {}: {e}", path.to_string_lossy()));
    }
}

fn read_binary(stack: &Stack) -> Vec<u8> {
    std::fs::read(&stack.binary).unwrap_or_else(|e| panic!("{}: {e}", stack.binary.display()))
}

#[test]
fn system_library_offers_system_api_1_15() {
    let Some(stack) = stack("system_library_offers_system_api_1_15") else {
        return;
    };
    let info = inspect::system_library(&stack.system_lib).expect("System library");
    assert_eq!(info.provider_name, "SYSTEM_QTI_AISW");
    assert_eq!((info.system_api.major, info.system_api.minor), (1, 15));
    eprintln!("real_stack: {info:?}");
    checked("system_library_offers_system_api_1_15");
}

#[test]
fn backend_library_offers_core_api_2_40() {
    let Some(stack) = stack("backend_library_offers_core_api_2_40") else {
        return;
    };
    let info = inspect::backend_library(&stack.backend_lib).expect("backend library");
    assert_eq!(info.provider_name, "HTP_QTI_AISW");
    assert_eq!(info.backend_id, QNN_BACKEND_ID_HTP);
    assert_eq!((info.core_api.major, info.core_api.minor), (2, 40));
    assert_eq!((info.backend_api.major, info.backend_api.minor), (5, 51));
    assert_eq!(info.build_id, BUILD_ID);
    eprintln!("real_stack: {info:?}");
    checked("backend_library_offers_core_api_2_40");
}

fn assert_u8_tensor(t: &TensorInfo, name: &str, scale: f32, zero_point: i32) {
    assert_eq!(t.name, name);
    assert_eq!(t.data_type, DataType::UFixed8, "{name}");
    assert_eq!(t.dims, vec![1, 16], "{name}");
    assert_eq!(t.byte_size, 16, "{name}");
    match &t.quantization {
        Quantization::PerTensor {
            scale: s,
            offset,
            bitwidth: None,
        } => {
            assert!(
                (s - scale).abs() <= scale * 1e-6,
                "{name}: scale {s}, expected {scale}"
            );
            assert_eq!(*offset, -zero_point, "{name}: offset");
        }
        other => panic!("{name}: quantization {other:?}, expected per-tensor"),
    }
}

/// The generator's model: a, b u8 [1,16] (0.02, zp 128) -> sum (0.04, zp 128), relu (0.02, zp 0).
fn assert_model_graphs(graphs: &[qnn::GraphInfo], graph_name: &str) {
    assert_eq!(graphs.len(), 1, "graphs: {graphs:?}");
    let g = &graphs[0];
    assert_eq!(g.name, graph_name, "the graph name ORT recorded");
    assert_eq!(g.inputs.len(), 2, "inputs: {:?}", g.inputs);
    assert_u8_tensor(&g.inputs[0], "a", 0.02, 128);
    assert_u8_tensor(&g.inputs[1], "b", 0.02, 128);
    let mut outputs: Vec<&TensorInfo> = g.outputs.iter().collect();
    outputs.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(outputs.len(), 2, "outputs: {:?}", g.outputs);
    assert_u8_tensor(outputs[0], "relu", 0.02, 0);
    assert_u8_tensor(outputs[1], "sum", 0.04, 128);
}

#[test]
fn metadata_of_an_ort_made_binary() {
    let Some(stack) = stack("metadata_of_an_ort_made_binary") else {
        return;
    };
    let info = inspect::binary_info(&stack.system_lib, &read_binary(&stack)).expect("binary info");
    assert_eq!(info.version, 3, "BinaryInfo version");
    assert_eq!(info.backend_id, QNN_BACKEND_ID_HTP);
    assert_eq!(info.build_id, BUILD_ID);
    assert_eq!((info.core_api.major, info.core_api.minor), (2, 40));
    assert_eq!(info.soc_model, Some(SOC_MODEL_QCS6490));
    assert_model_graphs(&info.graphs, &stack.graph_name);
    eprintln!(
        "real_stack: binary v{} backend {} core {} backend API {} blob {} soc {:?} model {:?}",
        info.version,
        info.backend_id,
        info.core_api,
        info.backend_api,
        info.context_blob_version,
        info.soc_version,
        info.soc_model
    );
    checked("metadata_of_an_ort_made_binary");
}

#[test]
fn malformed_binaries_get_the_system_librarys_code() {
    let Some(stack) = stack("malformed_binaries_get_the_system_librarys_code") else {
        return;
    };
    let binary = read_binary(&stack);
    let mut random = vec![0u8; 4096];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for b in &mut random {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    for (what, bytes) in [
        ("truncated to 1 KiB", &binary[..1024]),
        ("random bytes", &random[..]),
    ] {
        match inspect::binary_info(&stack.system_lib, bytes) {
            Err(e @ Error::Qnn { .. }) => {
                assert_eq!(e.qnn_code(), Some(30010), "{what}: {e}");
                assert!(
                    e.to_string().starts_with(
                        "systemContextGetMetaData failed with QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY (30010)"
                    ),
                    "{what}: {e}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    checked("malformed_binaries_get_the_system_librarys_code");
}

fn assert_qnn_error(result: &qnn::Result<impl std::fmt::Debug>, op: &str, code: u32, name: &str) {
    match result {
        Err(e @ Error::Qnn { .. }) => {
            assert_eq!(e.qnn_code(), Some(code), "{e}");
            let expected = format!("{op} failed with {name} ({code}): ");
            assert!(e.to_string().starts_with(&expected), "{e}");
            let Error::Qnn { detail, .. } = e else {
                unreachable!()
            };
            let text = detail.as_deref().expect("errorGetMessage's text");
            let said = match code {
                4000 => "Backend failed to initialize",
                1100 => "General error, which has not been identified as any other error type.",
                _ => unreachable!("no expected text for {code}"),
            };
            assert_eq!(text, said, "{e}");
            eprintln!("real_stack: {e}");
        }
        other => panic!("{op}: expected {name} ({code}), got {other:?}"),
    }
}

fn print_probe(probe: &BackendProbe) {
    eprintln!("real_stack: log_create {:?}", probe.log_create);
    eprintln!("real_stack: backend_create {:?}", probe.backend_create);
    eprintln!(
        "real_stack: device_platform_info {:?}",
        probe.device_platform_info
    );
    eprintln!("real_stack: device_create {:?}", probe.device_create);
}

#[test]
fn backend_and_device_creation() {
    let Some(stack) = stack("backend_and_device_creation") else {
        return;
    };
    let probe = inspect::probe_backend(&stack.backend_lib, Some(qnn::LogLevel::Error))
        .expect("backend library");
    print_probe(&probe);
    let log_create = probe.log_create.as_ref().expect("HTP has logCreate");
    let device_create = probe.device_create.as_ref().expect("HTP has deviceCreate");
    let platform = probe
        .device_platform_info
        .as_ref()
        .expect("HTP has deviceGetPlatformInfo");
    match stack.kind {
        BackendKind::Works => {
            log_create.as_ref().expect("logCreate");
            probe.backend_create.as_ref().expect("backendCreate");
            device_create.as_ref().expect("deviceCreate");
            let devices = platform.as_ref().expect("deviceGetPlatformInfo");
            assert!(!devices.is_empty(), "no hardware devices");
            assert!(devices.iter().all(|d| !d.cores.is_empty()), "{devices:?}");
        }
        BackendKind::NoDsp => {
            // No Snapdragon SoC: the HTP cannot initialize, and says so with codes, not a crash.
            // Even the log needs the backend's singleton provider, so logCreate fails first.
            assert_qnn_error(
                log_create,
                "logCreate",
                4000,
                "QNN_BACKEND_ERROR_CANNOT_INITIALIZE",
            );
            assert_qnn_error(
                &probe.backend_create,
                "backendCreate",
                4000,
                "QNN_BACKEND_ERROR_CANNOT_INITIALIZE",
            );
            assert_qnn_error(
                platform,
                "deviceGetPlatformInfo",
                1100,
                "QNN_COMMON_ERROR_GENERAL",
            );
            assert_qnn_error(
                device_create,
                "deviceCreate",
                1100,
                "QNN_COMMON_ERROR_GENERAL",
            );
        }
    }
    checked("backend_and_device_creation");
}

fn runtime(stack: &Stack) -> qnn::Result<Arc<Runtime>> {
    Runtime::new(
        &RuntimeConfig {
            backend_lib: stack.backend_lib.clone(),
            system_lib: stack.system_lib.clone(),
            log_level: Some(qnn::LogLevel::Error),
        },
        &Site::here(),
    )
}

/// QNN's `real = (q + offset) * scale`, for the expected outputs below.
fn dequantize(q: u8, scale: f64, zero_point: i32) -> f64 {
    (i32::from(q) - zero_point) as f64 * scale
}

#[test]
fn runtime_over_the_real_backend() {
    let Some(stack) = stack("runtime_over_the_real_backend") else {
        return;
    };
    let result = runtime(&stack);
    if stack.kind == BackendKind::NoDsp {
        assert_qnn_error(
            &result,
            "logCreate",
            4000,
            "QNN_BACKEND_ERROR_CANNOT_INITIALIZE",
        );
        assert_eq!(qnn::counters().runtimes_alive, 0);
        checked("runtime_over_the_real_backend");
        return;
    }
    let runtime = result.expect("runtime over the emulator");
    let info = runtime.info();
    assert_eq!(info.provider_name, "HTP_QTI_AISW");
    assert_eq!(info.build_id, BUILD_ID);
    let context = Context::from_file(&runtime, &stack.binary, &Site::here()).expect("context");
    assert_model_graphs(context.graphs(), &stack.graph_name);
    let graph = Graph::retrieve(&context, &stack.graph_name, &Site::here()).expect("graph");

    // a = b = q: sum = 2 * (q - 128) * 0.02, relu = max(sum, 0), each within one step.
    let a: Vec<u8> = (0..16).map(|i| 100 + 4 * i).collect();
    let b: Vec<u8> = (0..16).map(|i| 170 - 3 * i).collect();
    let (mut sum, mut relu) = ([0u8; 16], [0u8; 16]);
    let out_names: Vec<&str> = graph
        .info()
        .outputs
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let mut outputs: Vec<&mut [u8]> = if out_names == ["sum", "relu"] {
        vec![&mut sum, &mut relu]
    } else {
        vec![&mut relu, &mut sum]
    };
    graph.execute(&[&a, &b], &mut outputs).expect("execute");
    for i in 0..16 {
        let real = dequantize(a[i], 0.02, 128) + dequantize(b[i], 0.02, 128);
        let got_sum = dequantize(sum[i], 0.04, 128);
        let got_relu = dequantize(relu[i], 0.02, 0);
        assert!(
            (got_sum - real).abs() <= 0.04 + 1e-9,
            "sum[{i}] {got_sum} vs {real}"
        );
        assert!(
            (got_relu - real.max(0.0)).abs() <= 0.02 + 1e-9,
            "relu[{i}] {got_relu} vs {}",
            real.max(0.0)
        );
    }
    context.close().expect("close context");
    runtime.close().expect("close runtime");
    checked("runtime_over_the_real_backend");
}
