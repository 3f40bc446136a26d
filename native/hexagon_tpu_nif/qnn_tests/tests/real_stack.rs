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
            rpcmem_lib: qnn::shared::DEFAULT_RPCMEM_LIB.into(),
            log_level: Some(qnn::LogLevel::Error),
            performance: Default::default(),
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

/// Qualcomm's backend through its raw function table, without the `qnn` crate (which has its own
/// API for both: `LoadOptions` for context configs, `ExecuteQueue::Backend` for
/// `graphExecuteAsync`): what Qualcomm's library does with the raw calls, seen apart from qnn's
/// use of them. Everything runs on the test's thread, which creates and frees every handle (QNN
/// ties them to it).
mod raw {
    use std::ffi::{CString, c_void};
    use std::path::Path;
    use std::ptr;
    use std::sync::{Condvar, Mutex};
    use std::time::{Duration, Instant};

    use qnn::sys::*;

    pub struct Backend {
        _lib: libloading::Library,
        pub t: QnnInterface_ImplementationV2_32_t,
        pub core_minor: u32,
        log: Qnn_LogHandle_t,
        backend: Qnn_BackendHandle_t,
        device: Qnn_DeviceHandle_t,
    }

    pub fn check(what: &str, status: Qnn_ErrorHandle_t) {
        assert_eq!(error_code(status), 0, "{what}: {status:#x}");
    }

    impl Backend {
        /// Opens the library and takes its 2.x provider (whose table is at least the 2.32 one
        /// this crate declares).
        pub fn open(path: &Path) -> Backend {
            // SAFETY: Qualcomm's backend library; its initializers set up its own state.
            let lib = unsafe { libloading::Library::new(path) }.expect("dlopen the backend");
            type GetProviders = unsafe extern "C" fn(
                *mut *const *const QnnInterface_t,
                *mut u32,
            ) -> Qnn_ErrorHandle_t;
            // SAFETY: the bootstrap symbol has this signature.
            let get: libloading::Symbol<GetProviders> =
                unsafe { lib.get(b"QnnInterface_getProviders\0") }.expect("getProviders");
            let (mut list, mut n) = (ptr::null(), 0u32);
            // SAFETY: valid out-pointers.
            check("getProviders", unsafe { get(&mut list, &mut n) });
            assert!(n >= 1 && !list.is_null());
            // SAFETY: the library returned `n` provider pointers; the chosen one's minor is
            // checked before its table (of at least the 2.32 length) is copied.
            let (t, core_minor) = unsafe {
                let p = *list;
                let v = ptr::addr_of!((*p).apiVersion.coreApiVersion).read();
                assert!(v.major == 2 && v.minor >= 32, "core API {v:?}");
                (ptr::addr_of!((*p).table).read(), v.minor)
            };
            let mut b = Backend {
                _lib: lib,
                t,
                core_minor,
                log: ptr::null_mut(),
                backend: ptr::null_mut(),
                device: ptr::null_mut(),
            };
            // SAFETY: table functions with valid out-pointers; a NULL log callback makes the
            // backend log to stdout.
            unsafe {
                check(
                    "logCreate",
                    b.t.logCreate.unwrap()(ptr::null(), QNN_LOG_LEVEL_ERROR, &mut b.log),
                );
                check(
                    "backendCreate",
                    b.t.backendCreate.unwrap()(b.log, ptr::null(), &mut b.backend),
                );
                check(
                    "deviceCreate",
                    b.t.deviceCreate.unwrap()(b.log, ptr::null(), &mut b.device),
                );
            }
            b
        }

        /// `contextCreateFromBinary` with these configs (none: NULL).
        pub fn context(
            &self,
            binary: &[u8],
            config: &[QnnContext_Config_t],
        ) -> Result<Qnn_ContextHandle_t, u32> {
            let mut list: Vec<*const QnnContext_Config_t> =
                config.iter().map(|c| c as *const _).collect();
            list.push(ptr::null());
            let list = if config.is_empty() {
                ptr::null()
            } else {
                list.as_ptr()
            };
            let mut ctx = ptr::null_mut();
            // SAFETY: live handles of this thread; the binary is readable; the config list is
            // NULL or NULL-terminated and alive during the call.
            let rc = unsafe {
                self.t.contextCreateFromBinary.unwrap()(
                    self.backend,
                    self.device,
                    list,
                    binary.as_ptr().cast(),
                    binary.len() as u64,
                    &mut ctx,
                    ptr::null_mut(),
                )
            };
            if error_code(rc) == 0 {
                Ok(ctx)
            } else {
                Err(error_code(rc))
            }
        }

        pub fn free_context(&self, ctx: Qnn_ContextHandle_t) -> u32 {
            // SAFETY: a context of this backend, freed once, on its thread.
            error_code(unsafe { self.t.contextFree.unwrap()(ctx, ptr::null_mut()) })
        }

        pub fn graph(&self, ctx: Qnn_ContextHandle_t, name: &str) -> Qnn_GraphHandle_t {
            let name = CString::new(name).unwrap();
            let mut g = ptr::null_mut();
            // SAFETY: valid string and out-pointer; a live context.
            check("graphRetrieve", unsafe {
                self.t.graphRetrieve.unwrap()(ctx, name.as_ptr(), &mut g)
            });
            g
        }

        /// `propertyHasCapability(key)`'s code.
        pub fn has(&self, key: u32) -> u32 {
            // SAFETY: takes a value.
            error_code(unsafe { self.t.propertyHasCapability.unwrap()(key) })
        }
    }

    impl Drop for Backend {
        fn drop(&mut self) {
            // SAFETY: handles of this backend, freed once, in dependency order.
            unsafe {
                self.t.deviceFree.unwrap()(self.device);
                self.t.backendFree.unwrap()(self.backend);
                self.t.logFree.unwrap()(self.log);
            }
        }
    }

    /// One graph tensor's description and the buffer an execute gives it.
    pub struct Io {
        pub names: Vec<CString>,
        pub dims: Vec<Vec<u32>>,
        pub tensors: Vec<Qnn_Tensor_t>,
        pub bufs: Vec<Vec<u8>>,
    }

    // SAFETY: the tensors point into this struct's own names, dims and buffers.
    unsafe impl Send for Io {}

    impl Io {
        /// u8 tensors (the test model's) of these infos over these buffers.
        pub fn new(infos: &[qnn::TensorInfo], type_: u32, bufs: Vec<Vec<u8>>) -> Box<Io> {
            let mut io = Box::new(Io {
                names: infos
                    .iter()
                    .map(|t| CString::new(t.name.clone()).unwrap())
                    .collect(),
                dims: infos.iter().map(|t| t.dims.clone()).collect(),
                tensors: Vec::new(),
                bufs,
            });
            let io_ref = &mut *io;
            for (k, info) in infos.iter().enumerate() {
                let qnn::Quantization::PerTensor { scale, offset, .. } = info.quantization else {
                    panic!("{}: {:?}", info.name, info.quantization);
                };
                // SAFETY: all-zero is a valid `Qnn_TensorV1_t` (NULL pointers, zero numbers).
                let mut v1: Qnn_TensorV1_t = unsafe { std::mem::zeroed() };
                v1.id = info.id;
                v1.name = io_ref.names[k].as_ptr();
                v1.type_ = type_;
                v1.dataFormat = QNN_TENSOR_DATA_FORMAT_DENSE;
                v1.dataType = QNN_DATATYPE_UFIXED_POINT_8;
                v1.quantizeParams.encodingDefinition = QNN_DEFINITION_DEFINED;
                v1.quantizeParams.quantizationEncoding = QNN_QUANTIZATION_ENCODING_SCALE_OFFSET;
                v1.quantizeParams.encoding.scaleOffsetEncoding =
                    Qnn_ScaleOffset_t { scale, offset };
                v1.rank = io_ref.dims[k].len() as u32;
                v1.dimensions = io_ref.dims[k].as_mut_ptr();
                v1.memType = QNN_TENSORMEMTYPE_RAW;
                v1.memory.clientBuf = Qnn_ClientBuffer_t {
                    data: io_ref.bufs[k].as_mut_ptr().cast(),
                    dataSize: io_ref.bufs[k].len() as u32,
                };
                io_ref.tensors.push(Qnn_Tensor_t {
                    version: QNN_TENSOR_VERSION_1,
                    tensor: Qnn_TensorUnion_t { v1 },
                });
            }
            io
        }
    }

    /// One notification as the callback saw it.
    #[derive(Clone, Copy, Debug)]
    pub struct Note {
        pub tag: usize,
        pub code: u32,
        pub thread: os_thread::Tid,
        pub at: Instant,
    }

    #[derive(Default)]
    pub struct Recorder {
        pub notes: Mutex<Vec<Note>>,
        changed: Condvar,
    }

    impl Recorder {
        /// The notifications once there are `n`, or what came within `wait`.
        pub fn wait_for(&self, n: usize, wait: Duration) -> Vec<Note> {
            let deadline = Instant::now() + wait;
            let mut notes = self.notes.lock().unwrap();
            while notes.len() < n {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                notes = self.changed.wait_timeout(notes, left).unwrap().0;
            }
            notes.clone()
        }
    }

    pub struct Slot<'a> {
        pub recorder: &'a Recorder,
        pub tag: usize,
    }

    pub unsafe extern "C" fn record(param: *mut c_void, status: Qnn_NotifyStatus_t) {
        // SAFETY: every execute passes a `Slot` that outlives its notification.
        let slot = unsafe { &*(param as *const Slot) };
        let note = Note {
            tag: slot.tag,
            code: error_code(status.error),
            thread: os_thread::current(),
            at: Instant::now(),
        };
        let mut notes = slot.recorder.notes.lock().unwrap();
        notes.push(note);
        slot.recorder.changed.notify_all();
    }

    /// The OS thread id (no libc here): the target of `/proc/thread-self`.
    pub mod os_thread {
        pub type Tid = u64;
        pub fn current() -> Tid {
            std::fs::read_link("/proc/thread-self")
                .ok()
                .and_then(|p| p.file_name()?.to_str()?.parse().ok())
                .unwrap_or(0)
        }
    }
}

/// The test model's inputs number `k` (a, b).
fn async_inputs(k: usize) -> (Vec<u8>, Vec<u8>) {
    let a = (0..16).map(|i| (37 * k + 11 * i) as u8).collect();
    let b = (0..16).map(|i| (255 - 5 * k - 7 * i) as u8).collect();
    (a, b)
}

/// Measured on the x86-64 emulators of QAIRT 2.51 (`onnxruntime-qnn` 2.7.0) and 2.47 (2.3.0),
/// with binaries made by each: the table has a `graphExecuteAsync` entry, but
/// `propertyHasCapability(QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION)` answers 1000, every
/// `graphExecuteAsync` answers 1000 (`QNN_COMMON_ERROR_NOT_SUPPORTED`) at once, printing
/// `<E> Async execution is unsupported`, and no notification ever comes; a context accepts any
/// `QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH` (0 and 301 included, though QNN documents
/// 300 as the HTP's maximum) and `graphExecute` works in it. A QAIRT that executes
/// asynchronously fails this test, after checking what it did (FIFO notifications on a
/// thread of its own, outputs equal to `graphExecute`'s bit for bit), so that it is noticed.
#[test]
fn execute_async_on_the_real_backend() {
    use qnn::sys::*;
    use std::time::{Duration, Instant};
    let Some(stack) = stack("execute_async_on_the_real_backend") else {
        return;
    };
    if stack.kind == BackendKind::NoDsp {
        // No context can be made without a DSP (backend_and_device_creation shows how creation
        // fails); the table entry can still be read.
        let info = inspect::backend_library(&stack.backend_lib).expect("backend library");
        eprintln!(
            "real_stack: graphExecuteAsync entry present: {}",
            info.has_execute_async
        );
        checked("execute_async_on_the_real_backend");
        return;
    }
    let binary = read_binary(&stack);
    let info = inspect::binary_info(&stack.system_lib, &binary).expect("binary info");
    assert_model_graphs(&info.graphs, &stack.graph_name);
    let graph_info = info.graphs[0].clone();
    let b = raw::Backend::open(&stack.backend_lib);
    let execute_async =
        b.t.graphExecuteAsync
            .expect("the emulator's table has a graphExecuteAsync entry");
    assert!(
        inspect::backend_library(&stack.backend_lib)
            .expect("backend library")
            .has_execute_async
    );
    assert_eq!(
        b.has(QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION),
        QNN_COMMON_ERROR_NOT_SUPPORTED,
        "propertyHasCapability(QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION)"
    );
    eprintln!(
        "real_stack: {} (core 2.{}): graphExecuteAsync entry present, propertyHasCapability(ASYNC_EXECUTION) 1000",
        info.build_id, b.core_minor
    );
    let me = raw::os_thread::current();
    let n = 6;
    let outputs = || vec![vec![0u8; 16]; graph_info.outputs.len()];
    let mut supported = Vec::new();
    for depth in [
        None,
        Some(1),
        Some(2),
        Some(4),
        Some(8),
        Some(300),
        Some(301),
        Some(0),
    ] {
        let config: Vec<QnnContext_Config_t> = depth
            .map(QnnContext_Config_t::async_execution_queue_depth)
            .into_iter()
            .collect();
        let ctx = b
            .context(&binary, &config)
            .unwrap_or_else(|code| panic!("depth {depth:?}: contextCreateFromBinary {code}"));
        let graph = b.graph(ctx, &graph_info.name);
        // The reference: graphExecute on each input.
        let mut expected = Vec::new();
        for k in 0..n {
            let (x, y) = async_inputs(k);
            let ins = raw::Io::new(&graph_info.inputs, QNN_TENSOR_TYPE_APP_WRITE, vec![x, y]);
            let mut outs = raw::Io::new(&graph_info.outputs, QNN_TENSOR_TYPE_APP_READ, outputs());
            // SAFETY: tensors over live buffers of the graph's sizes.
            raw::check("graphExecute", unsafe {
                b.t.graphExecute.unwrap()(
                    graph,
                    ins.tensors.as_ptr(),
                    ins.tensors.len() as u32,
                    outs.tensors.as_mut_ptr(),
                    outs.tensors.len() as u32,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            });
            expected.push(outs.bufs.clone());
        }
        let recorder = raw::Recorder::default();
        let slots: Vec<raw::Slot> = (0..n)
            .map(|tag| raw::Slot {
                recorder: &recorder,
                tag,
            })
            .collect();
        let mut runs = Vec::new();
        let mut codes = Vec::new();
        let started = Instant::now();
        for (k, slot) in slots.iter().enumerate() {
            let (x, y) = async_inputs(k);
            let ins = raw::Io::new(&graph_info.inputs, QNN_TENSOR_TYPE_APP_WRITE, vec![x, y]);
            let mut outs = raw::Io::new(&graph_info.outputs, QNN_TENSOR_TYPE_APP_READ, outputs());
            // SAFETY: tensors over live buffers (kept in `runs` until the notifications or the
            // context's free); the notify parameter is a `Slot` that outlives them.
            let rc = unsafe {
                execute_async(
                    graph,
                    ins.tensors.as_ptr(),
                    ins.tensors.len() as u32,
                    outs.tensors.as_mut_ptr(),
                    outs.tensors.len() as u32,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    Some(raw::record),
                    (slot as *const raw::Slot).cast_mut().cast(),
                )
            };
            codes.push(error_code(rc));
            runs.push((ins, outs));
        }
        let calls_took = started.elapsed();
        let accepted = codes.iter().filter(|&&c| c == 0).count();
        let notes = recorder.wait_for(accepted, Duration::from_secs(60));
        let notified_during_calls = notes.iter().filter(|n| n.at < started + calls_took).count();
        eprintln!(
            "real_stack: depth {depth:?}: graphExecuteAsync answered {codes:?} in {calls_took:?}; \
             notifications (execute, code, on the caller's thread) {:?}, {notified_during_calls} \
             before the last call returned",
            notes
                .iter()
                .map(|n| (n.tag, n.code, n.thread == me))
                .collect::<Vec<_>>(),
        );
        assert_eq!(notes.len(), accepted, "depth {depth:?}: notifications");
        if accepted > 0 {
            let tags: Vec<usize> = notes.iter().map(|n| n.tag).collect();
            let mut fifo = tags.clone();
            fifo.sort_unstable();
            assert_eq!(tags, fifo, "depth {depth:?}: notifications out of order");
            assert!(
                notes.iter().all(|n| n.thread != me),
                "notified on the caller's thread"
            );
            for note in notes.iter().filter(|n| n.code == 0) {
                assert_eq!(
                    runs[note.tag].1.bufs, expected[note.tag],
                    "depth {depth:?}, execute {}: async outputs differ from graphExecute's",
                    note.tag
                );
            }
        }
        assert_eq!(b.free_context(ctx), 0);
        let late = recorder.wait_for(accepted + 1, Duration::from_millis(200));
        assert_eq!(late.len(), notes.len(), "a notification after contextFree");
        drop(runs);
        supported.push((depth, codes));
    }
    drop(b);
    for (depth, codes) in &supported {
        assert!(
            codes.iter().all(|&c| c == QNN_COMMON_ERROR_NOT_SUPPORTED),
            "{}: graphExecuteAsync answered {codes:?} at depth {depth:?}, not 1000 as QAIRT \
             2.47 and 2.51 do: this QAIRT executes asynchronously (its results were checked \
             above); hexagon_tpu can use it",
            info.build_id
        );
    }
    checked("execute_async_on_the_real_backend");
}
