//! Builds the C metadata structs QnnSystem hands out (BinaryInfo, GraphInfo array, tensors,
//! names, dims, quantization arrays), owned by a [`MetaArena`] that lives as long as the
//! System-context handle it was made through.

use std::ffi::{c_char, c_void};
use std::mem::{offset_of, size_of};
use std::ptr;

use qnn_sys::*;

use crate::model::*;

/// Everything one `getMetaData`/`getBinaryInfo` answer points to.
///
/// Allocations are `Vec`s pushed into owning lists: moving a `Vec` never moves (or
/// re-asserts uniqueness over) its heap buffer, so the raw pointers stored in the C structs
/// stay valid until the arena is dropped.
pub struct MetaArena {
    info: Vec<QnnSystemContext_BinaryInfo_t>,
    strings: Vec<Vec<u8>>,
    dims: Vec<Vec<u32>>,
    blobs: Vec<Vec<u64>>,
    scale_offsets: Vec<Vec<Qnn_ScaleOffset_t>>,
    floats: Vec<Vec<f32>>,
    ints: Vec<Vec<i32>>,
    tensors: Vec<Vec<Qnn_Tensor_t>>,
    graphs: Vec<u64>,
}

// SAFETY: the arena owns every allocation its raw pointers point into and has no thread
// affinity; it is only touched under the registry lock (and, per QNN's contract, read by the
// caller until `systemContextFree`, which takes that lock to drop it).
unsafe impl Send for MetaArena {}

impl MetaArena {
    /// The `QnnSystemContext_BinaryInfo_t` handed to the caller.
    pub fn info_ptr(&self) -> *const QnnSystemContext_BinaryInfo_t {
        self.info.as_ptr()
    }

    fn cstr(&mut self, bytes: &[u8]) -> *const c_char {
        let mut v = bytes.to_vec();
        v.push(0);
        let p = v.as_ptr().cast::<c_char>();
        self.strings.push(v);
        p
    }

    fn keep_u32(&mut self, mut v: Vec<u32>) -> *mut u32 {
        let p = v.as_mut_ptr();
        self.dims.push(v);
        p
    }

    fn keep_so(&mut self, mut v: Vec<Qnn_ScaleOffset_t>) -> *const Qnn_ScaleOffset_t {
        let p = v.as_mut_ptr();
        self.scale_offsets.push(v);
        p
    }

    fn keep_f32(&mut self, mut v: Vec<f32>) -> *const f32 {
        let p = v.as_mut_ptr();
        self.floats.push(v);
        p
    }

    fn keep_i32(&mut self, mut v: Vec<i32>) -> *const i32 {
        let p = v.as_mut_ptr();
        self.ints.push(v);
        p
    }

    fn keep_tensors(&mut self, mut v: Vec<Qnn_Tensor_t>) -> *mut Qnn_Tensor_t {
        if v.is_empty() {
            return ptr::null_mut();
        }
        let p = v.as_mut_ptr();
        self.tensors.push(v);
        p
    }
}

/// Library-level facts reported in the binary info.
pub struct MetaParams {
    pub backend_id: u32,
    pub build_id: *const c_char,
    pub core_api: Qnn_Version_t,
    pub backend_api: Qnn_Version_t,
    /// GraphInfo array stride (88, or 64 for System API < 1.4).
    pub stride: usize,
    pub binary_len: u64,
}

const ABSURD_COUNT: u32 = 1 << 30;
const UNKNOWN_VERSION: u32 = 99;
const UNKNOWN_DTYPE: u32 = 0x0999;
/// A quantization encoding no QAIRT defines (adversarial `unknown_encoding`).
const UNKNOWN_ENCODING: u32 = 99;

fn zero_quant_union() -> Qnn_QuantizeParamsUnion_t {
    Qnn_QuantizeParamsUnion_t {
        bwAxisScaleOffsetEncoding: Qnn_BwAxisScaleOffset_t {
            bitwidth: 0,
            axis: 0,
            numElements: 0,
            scales: ptr::null(),
            offsets: ptr::null(),
        },
    }
}

fn qp(encoding: u32, u: Qnn_QuantizeParamsUnion_t) -> Qnn_QuantizeParams_t {
    Qnn_QuantizeParams_t {
        encodingDefinition: if encoding == QNN_QUANTIZATION_ENCODING_UNDEFINED {
            QNN_DEFINITION_UNDEFINED
        } else {
            QNN_DEFINITION_DEFINED
        },
        quantizationEncoding: encoding,
        encoding: u,
    }
}

fn axis_so(
    arena: &mut MetaArena,
    axis: i32,
    so: Vec<Qnn_ScaleOffset_t>,
    count: u32,
    null: bool,
) -> Qnn_QuantizeParams_t {
    let p = if null { ptr::null() } else { arena.keep_so(so) };
    let mut u = zero_quant_union();
    u.axisScaleOffsetEncoding = Qnn_AxisScaleOffset_t {
        axis,
        numScaleOffsets: count,
        scaleOffset: p,
    };
    qp(QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET, u)
}

fn quant_params(
    arena: &mut MetaArena,
    spec: &TensorSpec,
    advs: &[AdversarialKind],
) -> Qnn_QuantizeParams_t {
    let has = |k| advs.contains(&k);
    let axis0 = spec.dims.first().copied().unwrap_or(1);
    let bad_scale = if has(AdversarialKind::ScaleZero) {
        Some(0.0)
    } else if has(AdversarialKind::ScaleNegative) {
        Some(-0.5)
    } else if has(AdversarialKind::ScaleNan) {
        Some(f32::NAN)
    } else {
        None
    };
    if has(AdversarialKind::AxisCountMismatch) {
        let n = axis0 + 1;
        return axis_so(
            arena,
            0,
            vec![
                Qnn_ScaleOffset_t {
                    scale: 1.0,
                    offset: 0
                };
                n as usize
            ],
            n,
            false,
        );
    }
    if has(AdversarialKind::AxisOutOfRange) {
        let rank = spec.dims.len() as i32;
        return axis_so(
            arena,
            rank,
            vec![Qnn_ScaleOffset_t {
                scale: 1.0,
                offset: 0,
            }],
            1,
            false,
        );
    }
    if has(AdversarialKind::NullScaleOffset) {
        return axis_so(arena, 0, Vec::new(), axis0, true);
    }
    if has(AdversarialKind::UnknownEncoding) {
        return qp(UNKNOWN_ENCODING, zero_quant_union());
    }
    if has(AdversarialKind::BlockEncoding) {
        let block = arena.keep_u32(spec.dims.iter().map(|_| 1).collect());
        let so = arena.keep_so(vec![Qnn_ScaleOffset_t {
            scale: 1.0,
            offset: 0,
        }]);
        let mut u = zero_quant_union();
        u.blockEncoding = Qnn_BlockEncoding_t {
            blockSize: block,
            scaleOffset: so,
        };
        return qp(QNN_QUANTIZATION_ENCODING_BLOCK, u);
    }
    let mut u = zero_quant_union();
    match &spec.quant {
        Quant::None => match bad_scale {
            Some(s) => {
                u.scaleOffsetEncoding = Qnn_ScaleOffset_t {
                    scale: s,
                    offset: 0,
                };
                qp(QNN_QUANTIZATION_ENCODING_SCALE_OFFSET, u)
            }
            None => qp(QNN_QUANTIZATION_ENCODING_UNDEFINED, u),
        },
        Quant::PerTensor {
            scale,
            offset,
            bitwidth,
        } => {
            let scale = bad_scale.unwrap_or(*scale);
            match bitwidth {
                None => {
                    u.scaleOffsetEncoding = Qnn_ScaleOffset_t {
                        scale,
                        offset: *offset,
                    };
                    qp(QNN_QUANTIZATION_ENCODING_SCALE_OFFSET, u)
                }
                Some(bw) => {
                    u.bwScaleOffsetEncoding = Qnn_BwScaleOffset_t {
                        bitwidth: *bw,
                        scale,
                        offset: *offset,
                    };
                    qp(QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET, u)
                }
            }
        }
        Quant::PerAxis {
            axis,
            scales,
            offsets,
            bitwidth,
        } => {
            let mut scales = scales.clone();
            if let (Some(s), Some(first)) = (bad_scale, scales.first_mut()) {
                *first = s;
            }
            let n = scales.len() as u32;
            match bitwidth {
                None => {
                    let so = scales
                        .iter()
                        .zip(offsets)
                        .map(|(&scale, &offset)| Qnn_ScaleOffset_t { scale, offset })
                        .collect();
                    axis_so(arena, *axis as i32, so, n, false)
                }
                Some(bw) => {
                    let sp = arena.keep_f32(scales);
                    let op = arena.keep_i32(offsets.clone());
                    u.bwAxisScaleOffsetEncoding = Qnn_BwAxisScaleOffset_t {
                        bitwidth: *bw,
                        axis: *axis as i32,
                        numElements: n,
                        scales: sp,
                        offsets: op,
                    };
                    qp(QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET, u)
                }
            }
        }
    }
}

fn tensor_struct(
    arena: &mut MetaArena,
    def: &TensorDef,
    type_: u32,
    version: u32,
    advs: &[AdversarialKind],
) -> Qnn_Tensor_t {
    let has = |k| advs.contains(&k);
    let name = if has(AdversarialKind::NullTensorName) {
        ptr::null()
    } else if has(AdversarialKind::NonUtf8TensorName) {
        arena.cstr(b"bad\xff\xfename")
    } else {
        arena.cstr(def.name.as_bytes())
    };
    let data_type = if has(AdversarialKind::UnknownDtype) {
        UNKNOWN_DTYPE
    } else {
        def.spec.dtype.code()
    };
    let mut dims = def.spec.dims.clone();
    if has(AdversarialKind::ZeroDim) {
        match dims.first_mut() {
            Some(d) => *d = 0,
            None => dims.push(0),
        }
    }
    if has(AdversarialKind::OverflowDims) {
        dims = vec![u32::MAX; 4];
    }
    if has(AdversarialKind::RankAbove8) {
        dims = vec![1; MAX_RANK + 1];
    }
    let mut rank = dims.len() as u32;
    let dims_ptr = if has(AdversarialKind::NullDims) {
        rank = rank.max(1);
        ptr::null_mut()
    } else if dims.is_empty() {
        ptr::null_mut()
    } else {
        arena.keep_u32(dims)
    };
    let quantize_params = quant_params(arena, &def.spec, advs);
    let version = if has(AdversarialKind::UnknownTensorVersion) {
        UNKNOWN_VERSION
    } else {
        version
    };
    let v1 = Qnn_TensorV1_t {
        id: def.id,
        name,
        type_,
        dataFormat: if has(AdversarialKind::SparseDataFormat) {
            QNN_TENSOR_DATA_FORMAT_SPARSE
        } else {
            QNN_TENSOR_DATA_FORMAT_DENSE
        },
        dataType: data_type,
        quantizeParams: quantize_params,
        rank,
        dimensions: dims_ptr,
        memType: QNN_TENSORMEMTYPE_RAW,
        memory: Qnn_TensorMemory_t {
            clientBuf: Qnn_ClientBuffer_t {
                data: ptr::null_mut(),
                dataSize: 0,
            },
        },
    };
    let mut t = Qnn_Tensor_t {
        version,
        tensor: Qnn_TensorUnion_t {
            v2: Qnn_TensorV2_t {
                id: v1.id,
                name: v1.name,
                type_: v1.type_,
                dataFormat: v1.dataFormat,
                dataType: v1.dataType,
                quantizeParams: v1.quantizeParams,
                rank: v1.rank,
                dimensions: v1.dimensions,
                memType: v1.memType,
                memory: v1.memory,
                isDynamicDimensions: ptr::null_mut(),
                sparseParams: Qnn_SparseParams_t {
                    type_: 0x7FFF_FFFF,
                    hybridCoo: Qnn_SparseLayoutHybridCoo_t::default(),
                },
                isProduced: 0,
            },
        },
    };
    if version == QNN_TENSOR_VERSION_1 {
        t.tensor.v1 = v1;
    }
    t
}

/// Writes a plain value at a byte offset of the GraphInfo storage (skipped if out of bounds).
fn put_at<T: Copy>(buf: &mut [u64], byte_off: usize, v: T) {
    if byte_off + size_of::<T>() > buf.len() * 8 {
        return;
    }
    // SAFETY: the range [byte_off, byte_off + size_of::<T>()) lies inside `buf` (checked
    // above); `write_unaligned` has no alignment requirement; T is a plain value (integer or
    // pointer) without padding.
    unsafe { ptr::write_unaligned(buf.as_mut_ptr().cast::<u8>().add(byte_off).cast::<T>(), v) };
}

/// An input (`false`, index) or output (`true`, index) of a graph.
type TensorTarget = Option<(bool, usize)>;

/// Which graph and input/output an adversarial option targets.
fn resolve(model: &Model, a: &Adversarial) -> (usize, TensorTarget) {
    let gi = a
        .graph
        .as_ref()
        .and_then(|n| model.graphs.iter().position(|g| &g.name == n))
        .unwrap_or(0);
    let g = &model.graphs[gi];
    let t = match &a.tensor {
        Some(name) => g
            .input_defs()
            .position(|d| &d.name == name)
            .map(|i| (false, i))
            .or_else(|| {
                g.output_defs()
                    .position(|d| &d.name == name)
                    .map(|i| (true, i))
            }),
        None if !g.inputs.is_empty() => Some((false, 0)),
        None => Some((true, 0)),
    };
    (gi, t)
}

/// Builds one answer for a (validated) model.
pub fn build(model: &Model, p: &MetaParams) -> MetaArena {
    let mut arena = MetaArena {
        info: Vec::new(),
        strings: Vec::new(),
        dims: Vec::new(),
        blobs: Vec::new(),
        scale_offsets: Vec::new(),
        floats: Vec::new(),
        ints: Vec::new(),
        tensors: Vec::new(),
        graphs: Vec::new(),
    };
    let b = &model.behaviour;
    let targets: Vec<(AdversarialKind, usize, TensorTarget)> = b
        .adversarial
        .iter()
        .map(|a| {
            let (g, t) = resolve(model, a);
            (a.kind, g, t)
        })
        .collect();
    let global = |k: AdversarialKind| targets.iter().any(|(kind, _, _)| *kind == k);
    let on_graph =
        |k: AdversarialKind, g: usize| targets.iter().any(|(kind, tg, _)| *kind == k && *tg == g);
    let on_tensor = |g: usize, out: bool, i: usize| -> Vec<AdversarialKind> {
        targets
            .iter()
            .filter(|(_, tg, t)| *tg == g && *t == Some((out, i)))
            .map(|(k, _, _)| *k)
            .collect()
    };

    let mut gversion = b.graph_info_version;
    if p.stride < size_of::<QnnSystemContext_GraphInfo_t>() && gversion == 3 {
        gversion = 2; // a 64-byte GraphInfo cannot hold V3
    }
    let n = model.graphs.len();
    let mut storage = vec![0u64; (n * p.stride).div_ceil(8)];
    let info_off = offset_of!(QnnSystemContext_GraphInfo_t, info);
    for (gi, g) in model.graphs.iter().enumerate() {
        let ins: Vec<Qnn_Tensor_t> = g
            .input_defs()
            .enumerate()
            .map(|(i, d)| {
                tensor_struct(
                    &mut arena,
                    d,
                    QNN_TENSOR_TYPE_APP_WRITE,
                    b.tensor_version,
                    &on_tensor(gi, false, i),
                )
            })
            .collect();
        let outs: Vec<Qnn_Tensor_t> = g
            .output_defs()
            .enumerate()
            .map(|(i, d)| {
                tensor_struct(
                    &mut arena,
                    d,
                    QNN_TENSOR_TYPE_APP_READ,
                    b.tensor_version,
                    &on_tensor(gi, true, i),
                )
            })
            .collect();
        let (mut n_in, mut n_out) = (ins.len() as u32, outs.len() as u32);
        let mut in_ptr = arena.keep_tensors(ins);
        let mut out_ptr = arena.keep_tensors(outs);
        if on_graph(AdversarialKind::AbsurdNumInputs, gi) {
            n_in = ABSURD_COUNT;
        }
        if on_graph(AdversarialKind::NullInputs, gi) {
            in_ptr = ptr::null_mut();
            n_in = n_in.max(1);
        }
        if on_graph(AdversarialKind::AbsurdNumOutputs, gi) {
            n_out = ABSURD_COUNT;
        }
        if on_graph(AdversarialKind::NullOutputs, gi) {
            out_ptr = ptr::null_mut();
            n_out = n_out.max(1);
        }
        let name = if on_graph(AdversarialKind::NullGraphName, gi) {
            ptr::null()
        } else {
            arena.cstr(g.name.as_bytes())
        };
        let version = if on_graph(AdversarialKind::UnknownGraphInfoVersion, gi) {
            UNKNOWN_VERSION
        } else {
            gversion
        };
        let base = gi * p.stride;
        let at = |field: usize| base + info_off + field;
        put_at(&mut storage, base, version);
        put_at(
            &mut storage,
            at(offset_of!(QnnSystemContext_GraphInfoV3_t, graphName)),
            name,
        );
        put_at(
            &mut storage,
            at(offset_of!(QnnSystemContext_GraphInfoV3_t, numGraphInputs)),
            n_in,
        );
        put_at(
            &mut storage,
            at(offset_of!(QnnSystemContext_GraphInfoV3_t, graphInputs)),
            in_ptr,
        );
        put_at(
            &mut storage,
            at(offset_of!(QnnSystemContext_GraphInfoV3_t, numGraphOutputs)),
            n_out,
        );
        put_at(
            &mut storage,
            at(offset_of!(QnnSystemContext_GraphInfoV3_t, graphOutputs)),
            out_ptr,
        );
        // V2: no updateable tensors (already zero). V3: the stamp's graph blob info or NULL, op
        // range [0, nodes).
        if version == 3
            && let Some(spill_fill) = model.stamp.spill_fill
        {
            // The emulator's version 1 graph blob info: version, spill-fill size, VTCM bytes.
            let mut blob = vec![1u64, spill_fill, 0];
            let blob_ptr = blob.as_mut_ptr().cast::<c_void>();
            arena.blobs.push(blob);
            put_at(
                &mut storage,
                at(offset_of!(
                    QnnSystemContext_GraphInfoV3_t,
                    graphBlobInfoSize
                )),
                24u32,
            );
            put_at(
                &mut storage,
                at(offset_of!(QnnSystemContext_GraphInfoV3_t, graphBlobInfo)),
                blob_ptr,
            );
        }
        if version == 3 {
            put_at(
                &mut storage,
                at(offset_of!(QnnSystemContext_GraphInfoV3_t, startOpIndex)),
                0u32,
            );
            put_at(
                &mut storage,
                at(offset_of!(QnnSystemContext_GraphInfoV3_t, endOpIndex)),
                g.nodes.len() as u32,
            );
        }
    }
    let mut graphs_ptr = storage.as_mut_ptr().cast::<QnnSystemContext_GraphInfo_t>();
    arena.graphs = storage;
    let mut num_graphs = n as u32;
    if global(AdversarialKind::AbsurdNumGraphs) {
        num_graphs = ABSURD_COUNT;
    }
    if global(AdversarialKind::NullGraphs) {
        graphs_ptr = ptr::null_mut();
    }
    let soc = arena.cstr(model.soc_version.as_bytes());
    let blob_version = Qnn_Version_t {
        major: crate::format::FORMAT_VERSION,
        minor: 0,
        patch: 0,
    };
    let zero = Qnn_Version_t::default();
    // The HTP context metadata as QAIRT 2.51's QnnSystem reports it: {u32 version 1, u32 arch}.
    let (context_metadata_size, context_metadata) = match model.stamp.dsp_arch {
        Some(arch) => (8u32, arena.keep_u32(vec![1, arch]).cast::<c_void>()),
        None => (0, ptr::null_mut()),
    };
    let v2 = QnnSystemContext_BinaryInfoV2_t {
        backendId: p.backend_id,
        buildId: p.build_id,
        coreApiVersion: p.core_api,
        backendApiVersion: p.backend_api,
        socVersion: soc,
        hwInfoBlobVersion: zero,
        contextBlobVersion: blob_version,
        hwInfoBlobSize: 0,
        hwInfoBlob: ptr::null_mut(),
        contextBlobSize: p.binary_len,
        numContextTensors: 0,
        contextTensors: ptr::null_mut(),
        numGraphs: num_graphs,
        graphs: graphs_ptr,
        platformInfo: ptr::null_mut::<c_void>(),
    };
    let v3 = QnnSystemContext_BinaryInfoV3_t {
        backendId: p.backend_id,
        buildId: p.build_id,
        coreApiVersion: p.core_api,
        backendApiVersion: p.backend_api,
        socVersion: soc,
        contextBlobVersion: blob_version,
        contextBlobSize: p.binary_len,
        numContextTensors: 0,
        contextTensors: ptr::null_mut(),
        numGraphs: num_graphs,
        graphs: graphs_ptr,
        platformInfo: ptr::null_mut(),
        contextMetadataSize: context_metadata_size,
        contextMetadata: context_metadata,
        socModel: model.stamp.soc_model.unwrap_or(0),
    };
    let (version, info) = if global(AdversarialKind::UnknownBinaryInfoVersion) {
        (
            UNKNOWN_VERSION,
            QnnSystemContext_BinaryInfoUnion_t {
                contextBinaryInfoV3: v3,
            },
        )
    } else {
        match b.binary_info_version {
            1 => {
                let v1 = QnnSystemContext_BinaryInfoV1_t {
                    backendId: v2.backendId,
                    buildId: v2.buildId,
                    coreApiVersion: v2.coreApiVersion,
                    backendApiVersion: v2.backendApiVersion,
                    socVersion: v2.socVersion,
                    hwInfoBlobVersion: v2.hwInfoBlobVersion,
                    contextBlobVersion: v2.contextBlobVersion,
                    hwInfoBlobSize: v2.hwInfoBlobSize,
                    hwInfoBlob: v2.hwInfoBlob,
                    contextBlobSize: v2.contextBlobSize,
                    numContextTensors: v2.numContextTensors,
                    contextTensors: v2.contextTensors,
                    numGraphs: v2.numGraphs,
                    graphs: v2.graphs,
                };
                // Start from V2 (it covers the whole union) so no byte is left unset.
                let mut u = QnnSystemContext_BinaryInfoUnion_t {
                    contextBinaryInfoV2: v2,
                };
                u.contextBinaryInfoV1 = v1;
                (1, u)
            }
            2 => (
                2,
                QnnSystemContext_BinaryInfoUnion_t {
                    contextBinaryInfoV2: v2,
                },
            ),
            _ => (
                3,
                QnnSystemContext_BinaryInfoUnion_t {
                    contextBinaryInfoV3: v3,
                },
            ),
        }
    };
    arena
        .info
        .push(QnnSystemContext_BinaryInfo_t { version, info });
    arena
}
