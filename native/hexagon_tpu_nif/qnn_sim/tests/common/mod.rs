//! Drives a fresh copy of the qnn_sim cdylib through its C entry points, the way a runtime
//! does (and independently of the `qnn` crate's runtime).
#![allow(dead_code)]

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::PathBuf;
use std::ptr;

use qnn_sys::*;

pub struct Sim {
    pub path: PathBuf,
    /// Never unloaded: the library's own std may have registered a thread-local destructor on
    /// a test thread (spawning its async worker reads std's spawn hooks), which runs when that
    /// thread ends, after the test; an unloaded copy then has it jump into unmapped code
    /// (SIGSEGV in about one run in four under qemu-aarch64). A process maps one copy per test.
    lib: &'static libloading::Library,
}

/// One tensor as read back from the metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMeta {
    pub version: u32,
    pub id: u32,
    pub name: Option<Vec<u8>>,
    pub type_: u32,
    pub data_type: u32,
    pub rank: u32,
    pub dims: Option<Vec<u32>>,
    pub encoding_definition: u32,
    pub encoding: u32,
    /// (axis, scale/offset list) for per-axis; (-1, [one]) for per-tensor.
    pub scale_offsets: Option<(i32, Vec<(f32, i32)>)>,
    pub bitwidth: Option<u32>,
    pub num_scale_offsets: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GraphMeta {
    pub version: u32,
    pub name: Option<String>,
    pub num_inputs: u32,
    pub num_outputs: u32,
    pub inputs: Vec<TensorMeta>,
    pub outputs: Vec<TensorMeta>,
    pub end_op_index: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BinaryMeta {
    pub version: u32,
    pub backend_id: u32,
    pub build_id: String,
    pub core_api: Qnn_Version_t,
    pub soc_version: String,
    pub context_blob_size: u64,
    pub num_graphs: u32,
    pub graphs_null: bool,
    pub graphs: Vec<GraphMeta>,
}

/// Reads a C string.
///
/// # Safety
/// `p` must be NULL or NUL-terminated.
unsafe fn cstr(p: *const c_char) -> Option<Vec<u8>> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-NULL, NUL-terminated per the caller.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes().to_vec())
    }
}

/// # Safety
/// `t` must point to a tensor the library handed out (pointers valid while the System
/// context lives), with sane counts.
pub unsafe fn read_tensor_meta(t: *const Qnn_Tensor_t) -> TensorMeta {
    // SAFETY: per the caller; v1 and v2 share their first 112 bytes, which is all we read.
    unsafe {
        let t = &*t;
        let v = t.tensor.v1;
        let dims = if v.dimensions.is_null() || v.rank > 16 {
            None
        } else {
            Some(std::slice::from_raw_parts(v.dimensions, v.rank as usize).to_vec())
        };
        let q = v.quantizeParams;
        let (so, bw, n) = match q.quantizationEncoding {
            QNN_QUANTIZATION_ENCODING_SCALE_OFFSET => {
                let s = q.encoding.scaleOffsetEncoding;
                (Some((-1, vec![(s.scale, s.offset)])), None, 1)
            }
            QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET => {
                let s = q.encoding.bwScaleOffsetEncoding;
                (Some((-1, vec![(s.scale, s.offset)])), Some(s.bitwidth), 1)
            }
            QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET => {
                let a = q.encoding.axisScaleOffsetEncoding;
                let list = if a.scaleOffset.is_null() || a.numScaleOffsets > 4096 {
                    None
                } else {
                    Some(
                        std::slice::from_raw_parts(a.scaleOffset, a.numScaleOffsets as usize)
                            .iter()
                            .map(|s| (s.scale, s.offset))
                            .collect(),
                    )
                };
                (list.map(|l| (a.axis, l)), None, a.numScaleOffsets)
            }
            QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET => {
                let a = q.encoding.bwAxisScaleOffsetEncoding;
                let n = a.numElements as usize;
                let scales = std::slice::from_raw_parts(a.scales, n);
                let offsets = std::slice::from_raw_parts(a.offsets, n);
                let l = scales.iter().zip(offsets).map(|(&s, &o)| (s, o)).collect();
                (Some((a.axis, l)), Some(a.bitwidth), a.numElements)
            }
            _ => (None, None, 0),
        };
        TensorMeta {
            version: t.version,
            id: v.id,
            name: cstr(v.name),
            type_: v.type_,
            data_type: v.dataType,
            rank: v.rank,
            dims,
            encoding_definition: q.encodingDefinition,
            encoding: q.quantizationEncoding,
            scale_offsets: so,
            bitwidth: bw,
            num_scale_offsets: n,
        }
    }
}

/// # Safety
/// `info` must be an answer of the library, still alive; `stride` its GraphInfo stride.
pub unsafe fn read_binary_meta(
    info: *const QnnSystemContext_BinaryInfo_t,
    stride: usize,
) -> BinaryMeta {
    // SAFETY: per the caller; the union member read matches `version`.
    unsafe {
        let info = &*info;
        // Every version has these fields, under the same names (V3 at other offsets): one
        // read for three structs.
        macro_rules! fields {
            ($i:expr) => {{
                let i = $i;
                (
                    i.backendId,
                    i.buildId,
                    i.coreApiVersion,
                    i.socVersion,
                    i.contextBlobSize,
                    i.numGraphs,
                    i.graphs,
                )
            }};
        }
        let (backend_id, build_id, core, soc, size, n, graphs) = match info.version {
            1 => fields!(info.info.contextBinaryInfoV1),
            2 => fields!(info.info.contextBinaryInfoV2),
            _ => fields!(info.info.contextBinaryInfoV3),
        };
        let mut out = Vec::new();
        if !graphs.is_null() && n < 1000 {
            for k in 0..n as usize {
                let g = &*graphs
                    .cast::<u8>()
                    .add(k * stride)
                    .cast::<QnnSystemContext_GraphInfo_t>();
                let v = g.info.graphInfoV1;
                let read = |p: *mut Qnn_Tensor_t, n: u32| -> Vec<TensorMeta> {
                    if p.is_null() || n > 1000 {
                        return Vec::new();
                    }
                    (0..n as usize)
                        .map(|i| read_tensor_meta(p.add(i)))
                        .collect()
                };
                out.push(GraphMeta {
                    version: g.version,
                    name: cstr(v.graphName).map(|b| String::from_utf8(b).unwrap()),
                    num_inputs: v.numGraphInputs,
                    num_outputs: v.numGraphOutputs,
                    inputs: read(v.graphInputs, v.numGraphInputs),
                    outputs: read(v.graphOutputs, v.numGraphOutputs),
                    end_op_index: if g.version == 3 {
                        Some(g.info.graphInfoV3.endOpIndex)
                    } else {
                        None
                    },
                });
            }
        }
        BinaryMeta {
            version: info.version,
            backend_id,
            build_id: String::from_utf8(cstr(build_id).unwrap_or_default()).unwrap(),
            core_api: core,
            soc_version: String::from_utf8(cstr(soc).unwrap_or_default()).unwrap(),
            context_blob_size: size,
            num_graphs: n,
            graphs_null: graphs.is_null(),
            graphs: out,
        }
    }
}

pub struct Session {
    pub log: *mut c_void,
    pub backend: *mut c_void,
    pub device: *mut c_void,
}

pub fn code(h: Qnn_ErrorHandle_t) -> u32 {
    error_code(h)
}

impl Sim {
    /// Loads a fresh copy of the library.
    pub fn load() -> Sim {
        let path = qnn_sim::testing::fresh_library();
        // SAFETY: loading our own test library, whose initializers are trivial.
        let lib = unsafe { libloading::Library::new(&path) }.expect("dlopen qnn_sim copy");
        Sim {
            path,
            lib: Box::leak(Box::new(lib)),
        }
    }

    /// The same library instance again, for a thread of its own.
    pub fn reopen(&self) -> Sim {
        Sim {
            path: self.path.clone(),
            lib: self.lib,
        }
    }

    fn sym<T: Copy>(&self, name: &[u8]) -> T {
        // SAFETY: each caller names an export with exactly the function type `T`.
        unsafe { *self.lib.get::<T>(name).expect("symbol") }
    }

    pub fn configure(&self, key: &str, value: &str) -> i32 {
        let f: unsafe extern "C" fn(*const c_char, *const c_char) -> i32 =
            self.sym(b"QnnSim_configure");
        let (k, v) = (CString::new(key).unwrap(), CString::new(value).unwrap());
        // SAFETY: two valid C strings.
        unsafe { f(k.as_ptr(), v.as_ptr()) }
    }

    fn counter(&self, name: &[u8]) -> u64 {
        let f: extern "C" fn() -> u64 = self.sym(name);
        f()
    }

    pub fn live(&self) -> u64 {
        self.counter(b"QnnSim_liveHandles")
    }
    pub fn overlaps(&self) -> u64 {
        self.counter(b"QnnSim_executeOverlaps")
    }
    pub fn peak(&self) -> u64 {
        self.counter(b"QnnSim_peakConcurrentExecutes")
    }
    pub fn executes(&self) -> u64 {
        self.counter(b"QnnSim_executeCount")
    }
    pub fn violations(&self) -> u64 {
        self.counter(b"QnnSim_lifetimeViolations")
    }
    pub fn async_in_flight(&self) -> u64 {
        self.counter(b"QnnSim_asyncInFlight")
    }
    pub fn peak_async_in_flight(&self) -> u64 {
        self.counter(b"QnnSim_peakAsyncInFlight")
    }
    pub fn async_notifications(&self) -> u64 {
        self.counter(b"QnnSim_asyncNotifications")
    }
    /// Any `QnnSim_*` counter by its symbol name.
    pub fn counter_named(&self, name: &str) -> u64 {
        self.counter(name.as_bytes())
    }

    /// All core providers, copied.
    pub fn providers(&self) -> Vec<QnnInterface_t> {
        // SAFETY: the symbol is `QnnInterface_getProviders`; the minor sits in every provider.
        unsafe {
            self.read_providers(b"QnnInterface_getProviders", |p: *const QnnInterface_t| {
                let minor = ptr::addr_of!((*p).apiVersion.coreApiVersion.minor).read();
                qnn_sim::ffi::providers::core_provider_len(minor)
            })
        }
    }

    /// All System providers, copied.
    pub fn system_providers(&self) -> Vec<QnnSystemInterface_t> {
        // SAFETY: the symbol is `QnnSystemInterface_getProviders`; the minor sits in every
        // provider.
        unsafe {
            self.read_providers(
                b"QnnSystemInterface_getProviders",
                |p: *const QnnSystemInterface_t| {
                    let minor = ptr::addr_of!((*p).systemApiVersion.minor).read();
                    qnn_sim::ffi::providers::system_provider_len(minor)
                },
            )
        }
    }

    /// Calls a `getProviders` entry point and copies each provider only up to the length its
    /// own minor guarantees (the backend puts a guard page right after it), into a zeroed
    /// struct whose missing entries stay NULL.
    ///
    /// # Safety
    /// `symbol` must be a `getProviders` entry point for providers of type `T`, and `len_of`
    /// must return at most the readable length of the provider it is given.
    unsafe fn read_providers<T>(
        &self,
        symbol: &[u8],
        len_of: impl Fn(*const T) -> usize,
    ) -> Vec<T> {
        let f: unsafe extern "C" fn(*mut *const *const T, *mut u32) -> Qnn_ErrorHandle_t =
            self.sym(symbol);
        let mut list: *const *const T = ptr::null();
        let mut n = 0u32;
        // SAFETY: valid out-pointers.
        assert_eq!(unsafe { f(&mut list, &mut n) }, 0);
        (0..n as usize)
            .map(|i| {
                // SAFETY: the library returned `n` provider pointers valid until unload, and
                // `len_of` bounds the read per the contract.
                unsafe {
                    let p = *list.add(i);
                    copy_prefix(p, len_of(p))
                }
            })
            .collect()
    }

    pub fn core(&self) -> QnnInterface_ImplementationV2_32_t {
        self.providers()[0].table
    }

    pub fn sys(&self) -> QnnSystemInterface_ImplementationV1_7_t {
        self.system_providers()[0].table
    }

    pub fn open(&self) -> Session {
        let t = self.core();
        let mut s = Session {
            log: ptr::null_mut(),
            backend: ptr::null_mut(),
            device: ptr::null_mut(),
        };
        // SAFETY: table functions of the loaded library, called with valid out-pointers.
        unsafe {
            assert_eq!(
                t.logCreate.unwrap()(ptr::null(), QNN_LOG_LEVEL_WARN, &mut s.log),
                0
            );
            assert_eq!(
                t.backendCreate.unwrap()(s.log, ptr::null(), &mut s.backend),
                0
            );
            assert_eq!(
                t.deviceCreate.unwrap()(s.log, ptr::null(), &mut s.device),
                0
            );
        }
        s
    }

    pub fn close(&self, s: Session) {
        let t = self.core();
        // SAFETY: handles from `open`, freed once, in dependency order.
        unsafe {
            assert_eq!(t.deviceFree.unwrap()(s.device), 0);
            assert_eq!(t.backendFree.unwrap()(s.backend), 0);
            assert_eq!(t.logFree.unwrap()(s.log), 0);
        }
    }

    pub fn create_context(&self, s: &Session, bytes: &[u8]) -> Result<*mut c_void, u32> {
        self.create_context_with(s, bytes, &[])
    }

    /// Creates a context with these config options (none: a NULL config).
    pub fn create_context_with(
        &self,
        s: &Session,
        bytes: &[u8],
        config: &[QnnContext_Config_t],
    ) -> Result<*mut c_void, u32> {
        let t = self.core();
        let mut ctx = ptr::null_mut();
        let mut list: Vec<*const QnnContext_Config_t> =
            config.iter().map(|c| c as *const _).collect();
        list.push(ptr::null());
        let list = if config.is_empty() {
            ptr::null()
        } else {
            list.as_ptr()
        };
        // SAFETY: `bytes` is readable for its length; valid out-pointer; the config list is
        // NULL or NULL-terminated, its entries alive during the call.
        let rc = unsafe {
            t.contextCreateFromBinary.unwrap()(
                s.backend,
                s.device,
                list,
                bytes.as_ptr().cast(),
                bytes.len() as u64,
                &mut ctx,
                ptr::null_mut(),
            )
        };
        if rc == 0 { Ok(ctx) } else { Err(code(rc)) }
    }

    pub fn free_context(&self, ctx: *mut c_void) -> u32 {
        // SAFETY: any handle value is acceptable to the library.
        code(unsafe { self.core().contextFree.unwrap()(ctx, ptr::null_mut()) })
    }

    pub fn retrieve(&self, ctx: *mut c_void, name: &str) -> Result<*mut c_void, u32> {
        let mut g = ptr::null_mut();
        let n = CString::new(name).unwrap();
        // SAFETY: valid C string and out-pointer.
        let rc = unsafe { self.core().graphRetrieve.unwrap()(ctx, n.as_ptr(), &mut g) };
        if rc == 0 { Ok(g) } else { Err(code(rc)) }
    }

    /// Metadata through a new System context: (handle, answer pointer) or the error code.
    pub fn metadata_raw(
        &self,
        bytes: &[u8],
    ) -> Result<(*mut c_void, *const QnnSystemContext_BinaryInfo_t), u32> {
        let t = self.sys();
        let mut h = ptr::null_mut();
        let mut info = ptr::null();
        // SAFETY: valid out-pointers; `bytes` readable.
        unsafe {
            assert_eq!(t.systemContextCreate.unwrap()(&mut h), 0);
            let rc = t.systemContextGetMetaData.unwrap()(
                h,
                bytes.as_ptr().cast(),
                bytes.len() as u64,
                &mut info,
            );
            if rc != 0 {
                assert_eq!(t.systemContextFree.unwrap()(h), 0);
                return Err(code(rc));
            }
        }
        Ok((h, info))
    }

    pub fn free_system(&self, h: *mut c_void) -> u32 {
        // SAFETY: any handle value is acceptable to the library.
        code(unsafe { self.sys().systemContextFree.unwrap()(h) })
    }

    pub fn metadata(&self, bytes: &[u8]) -> Result<BinaryMeta, u32> {
        let (h, info) = self.metadata_raw(bytes)?;
        // SAFETY: a live answer with the default 88-byte stride.
        let m = unsafe { read_binary_meta(info, 88) };
        assert_eq!(self.free_system(h), 0);
        Ok(m)
    }

    /// Runs graph `name` of a context on `inputs`, building the tensor structs from the
    /// library's own metadata (as the runtime does). Returns the outputs or the error code.
    pub fn execute(
        &self,
        bytes: &[u8],
        graph: *mut c_void,
        name: &str,
        inputs: &[&[u8]],
    ) -> Result<Vec<Vec<u8>>, u32> {
        let (h, info) = self.metadata_raw(bytes).expect("metadata");
        let result = self.execute_with_info(info, graph, name, inputs, |_, _| {});
        assert_eq!(self.free_system(h), 0);
        result
    }

    /// Like `execute`, with a hook that may tamper with the (inputs, outputs) structs.
    pub fn execute_with_info(
        &self,
        info: *const QnnSystemContext_BinaryInfo_t,
        graph: *mut c_void,
        name: &str,
        inputs: &[&[u8]],
        tamper: impl FnOnce(&mut Vec<Qnn_Tensor_t>, &mut Vec<Qnn_Tensor_t>),
    ) -> Result<Vec<Vec<u8>>, u32> {
        // SAFETY: a live answer; the tensor structs are copied, their name/dims pointers stay
        // valid while the System context lives; client buffers point to live vectors.
        unsafe {
            let m = read_binary_meta(info, 88);
            let gi = m
                .graphs
                .iter()
                .position(|g| g.name.as_deref() == Some(name))
                .expect("graph");
            let g = &*(*info).info.contextBinaryInfoV3.graphs.add(gi);
            let v = g.info.graphInfoV1;
            let mut ins: Vec<Qnn_Tensor_t> = (0..v.numGraphInputs as usize)
                .map(|i| *v.graphInputs.add(i))
                .collect();
            let mut outs: Vec<Qnn_Tensor_t> = (0..v.numGraphOutputs as usize)
                .map(|i| *v.graphOutputs.add(i))
                .collect();
            let mut out_bufs: Vec<Vec<u8>> = m.graphs[gi]
                .outputs
                .iter()
                .map(|t| vec![0u8; byte_size(t)])
                .collect();
            for (t, data) in ins.iter_mut().zip(inputs) {
                t.tensor.v1.memType = QNN_TENSORMEMTYPE_RAW;
                t.tensor.v1.memory.clientBuf = Qnn_ClientBuffer_t {
                    data: data.as_ptr() as *mut c_void,
                    dataSize: data.len() as u32,
                };
            }
            for (t, buf) in outs.iter_mut().zip(out_bufs.iter_mut()) {
                t.tensor.v1.memType = QNN_TENSORMEMTYPE_RAW;
                t.tensor.v1.memory.clientBuf = Qnn_ClientBuffer_t {
                    data: buf.as_mut_ptr().cast(),
                    dataSize: buf.len() as u32,
                };
            }
            tamper(&mut ins, &mut outs);
            let rc = self.core().graphExecute.unwrap()(
                graph,
                ins.as_ptr(),
                ins.len() as u32,
                outs.as_mut_ptr(),
                outs.len() as u32,
                ptr::null_mut(),
                ptr::null_mut(),
            );
            if rc == 0 { Ok(out_bufs) } else { Err(code(rc)) }
        }
    }

    pub fn error_message(&self, code: u64) -> String {
        let mut p: *const c_char = ptr::null();
        // SAFETY: valid out-pointer; the answer is a static string.
        unsafe {
            assert_eq!(self.core().errorGetMessage.unwrap()(code, &mut p), 0);
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

pub fn byte_size(t: &TensorMeta) -> usize {
    let n: usize = t
        .dims
        .as_ref()
        .unwrap()
        .iter()
        .map(|&d| d as usize)
        .product();
    let el = match t.data_type & 0xFF {
        0x08 => 1,
        0x16 => 2,
        0x32 => 4,
        _ => 8,
    };
    n * el
}

// SAFETY: the handles are plain ids; the library is thread-safe.
unsafe impl Send for Session {}
// SAFETY: as above.
unsafe impl Sync for Session {}

/// Copies the first `len` bytes of `*p` into a zeroed `T`.
///
/// # Safety
/// `p` must be readable for `len` bytes, `len <= size_of::<T>()`, and an all-zero `T` must be
/// valid (NULL pointers and `None` function pointers).
unsafe fn copy_prefix<T>(p: *const T, len: usize) -> T {
    let mut out = std::mem::MaybeUninit::<T>::zeroed();
    // SAFETY: per the contract; the destination is a fresh local.
    unsafe {
        ptr::copy_nonoverlapping(p.cast::<u8>(), out.as_mut_ptr().cast::<u8>(), len);
        out.assume_init()
    }
}
