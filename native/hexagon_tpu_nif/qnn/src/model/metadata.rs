//! Reading a context binary's graphs through QnnSystem.

use std::sync::Arc;

use crate::base::error::{Error, Result};
use crate::base::version::Version;
use crate::ffi::loader::SystemLibrary;
use crate::model::tensor::{TensorInfo, TensorTemplate, read_name, read_tensor};
use crate::sys::{self, Qnn_Tensor_t, QnnSystemContext_BinaryInfo_t};

/// More graphs than this in one binary is taken as corrupt metadata.
pub const MAX_GRAPHS: u32 = 1024;
/// More inputs or outputs than this in one graph is taken as corrupt metadata.
pub const MAX_GRAPH_TENSORS: u32 = 4096;

/// A graph's name and its inputs and outputs, in the order the model declares them.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphInfo {
    pub name: String,
    pub inputs: Vec<TensorInfo>,
    pub outputs: Vec<TensorInfo>,
}

/// What QnnSystem reports about a context binary as a whole, and its graphs.
#[derive(Clone, Debug, PartialEq)]
pub struct BinaryInfo {
    /// The `QnnSystemContext_BinaryInfo_t` version the library answered with (1, 2 or 3).
    pub version: u32,
    /// The backend the binary was made for (6 is the HTP).
    pub backend_id: u32,
    /// The build id of the QNN that made the binary (`""` when it recorded none).
    pub build_id: String,
    pub core_api: Version,
    pub backend_api: Version,
    /// The SoC version string, `""` when the binary records none.
    pub soc_version: String,
    pub context_blob_version: Version,
    /// The SoC model the binary was made for (35 is the QCS6490; 0 when the compile set none);
    /// BinaryInfo v3 only.
    pub soc_model: Option<u32>,
    /// The HTP (DSP) architecture it was made for (68 for v68), from the HTP context metadata
    /// of BinaryInfo v3 (`{u32 version = 1, u32 arch}`, measured on QAIRT 2.51 binaries).
    pub dsp_arch: Option<u32>,
    /// The largest VTCM size its graphs ask for, in bytes, from each graph's HTP blob info
    /// (GraphInfo v3; `u64` at byte 16 of blob info version 1, measured on QAIRT 2.51 binaries:
    /// 4194304 for a v68 compile).
    pub vtcm_size: Option<u64>,
    pub graphs: Vec<GraphInfo>,
}

#[cfg(test)]
impl BinaryInfo {
    /// The tests' binary: an HTP (v68, QCS6490, 4 MiB of VTCM) BinaryInfo v3 made by
    /// `build_id`, with QAIRT 2.51's API versions and no graphs.
    pub(crate) fn for_tests(build_id: &str) -> BinaryInfo {
        BinaryInfo {
            version: 3,
            backend_id: 6,
            build_id: build_id.into(),
            core_api: Version::new(2, 40, 0),
            backend_api: Version::new(5, 51, 0),
            soc_version: String::new(),
            context_blob_version: Version::new(4, 0, 6),
            soc_model: Some(35),
            dsp_arch: Some(68),
            vtcm_size: Some(4194304),
            graphs: Vec::new(),
        }
    }
}

/// A binary's header fields with its graphs' full metadata.
pub(crate) struct BinaryMetadata {
    pub info: BinaryInfo,
    pub graphs: Vec<Arc<GraphMetadata>>,
    /// The largest spill-fill buffer its graphs' HTP blob infos report, in bytes (GraphInfo v3
    /// with a version 1 blob): the host memory the backend allocates for the context (one
    /// buffer, shared by its graphs). `None` where the System library does not report it.
    pub spill_fill_size: Option<u64>,
}

/// A graph's metadata plus what execute needs to describe its tensors to QNN.
#[derive(Debug)]
pub(crate) struct GraphMetadata {
    pub info: GraphInfo,
    pub input_templates: Vec<TensorTemplate>,
    pub output_templates: Vec<TensorTemplate>,
}

/// Frees a System context however the reading ends.
struct SystemContext<'a> {
    library: &'a SystemLibrary,
    handle: sys::QnnSystemContext_Handle_t,
}

impl Drop for SystemContext<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from this library's systemContextCreate and is freed once,
        // after the last read of its answers. Once exit has begun it is left to the process's end.
        match unsafe { self.library.system_context_free(self.handle) } {
            Ok(()) | Err(Error::Exiting) => {}
            Err(_) => crate::observe::counters::record_release_error(),
        }
    }
}

/// Reads what QnnSystem says about `binary`: its header fields and every graph.
pub(crate) fn read_binary(library: &SystemLibrary, binary: &[u8]) -> Result<BinaryMetadata> {
    let handle = library.system_context_create()?;
    if handle.is_null() {
        return Err(Error::invalid_model(
            "systemContextCreate returned a NULL handle",
        ));
    }
    let context = SystemContext { library, handle };

    // The deprecated entry takes a mutable buffer, so it gets a copy it may scribble on. The
    // answer may point into that buffer, so the copy lives until the answer has been read.
    let mut copy: Vec<u8> = Vec::new();
    // SAFETY: the System context is live (freed when `context` drops, after the answer is read);
    // `copy` is not touched until the answer has been read.
    let info = unsafe { library.system_context_binary_info(context.handle, binary, &mut copy) }?;
    if info.is_null() {
        return Err(Error::invalid_model("QnnSystem returned no binary info"));
    }
    let stride =
        sys::graph_info_stride(library.system_api.minor).ok_or_else(|| Error::Internal {
            message: format!(
                "no GraphInfo stride for System API minor {} (the loader accepts only known ones)",
                library.system_api.minor
            ),
        })?;
    // SAFETY: `info` is the System library's answer for this binary, alive until `context` drops;
    // any part of it in `copy` lives as long.
    let read = unsafe { read_binary_info(info, stride) };
    drop(copy);
    read
}

/// The fields every BinaryInfo version has, in the order of the V1 struct.
struct Header {
    backend_id: u32,
    build_id: *const std::ffi::c_char,
    core_api: sys::Qnn_Version_t,
    backend_api: sys::Qnn_Version_t,
    soc_version: *const std::ffi::c_char,
    context_blob_version: sys::Qnn_Version_t,
    soc_model: Option<u32>,
    /// The context metadata blob (BinaryInfo v3 only).
    context_metadata: (u32, *const std::ffi::c_void),
    num_graphs: u32,
    graphs: *mut sys::QnnSystemContext_GraphInfo_t,
}

macro_rules! header {
    ($v:expr, $soc_model:expr, $context_metadata:expr) => {
        Header {
            backend_id: $v.backendId,
            build_id: $v.buildId,
            core_api: $v.coreApiVersion,
            backend_api: $v.backendApiVersion,
            soc_version: $v.socVersion,
            context_blob_version: $v.contextBlobVersion,
            soc_model: $soc_model,
            context_metadata: $context_metadata,
            num_graphs: $v.numGraphs,
            graphs: $v.graphs,
        }
    };
}

const NO_BLOB: (u32, *const std::ffi::c_void) = (0, std::ptr::null());

/// Larger blobs than this are not read (the ones measured are 8 and 112 bytes).
const MAX_BLOB: u32 = 4096;

/// A copy of a blob the System library reports, `None` when NULL, empty or above [`MAX_BLOB`].
///
/// # Safety
/// `blob` must be NULL or readable for `size` bytes.
unsafe fn read_blob((size, blob): (u32, *const std::ffi::c_void)) -> Option<Vec<u8>> {
    if blob.is_null() || size == 0 || size > MAX_BLOB {
        return None;
    }
    // SAFETY: non-NULL and readable for `size` bytes per the contract.
    Some(unsafe { std::slice::from_raw_parts(blob.cast::<u8>(), size as usize) }.to_vec())
}

fn u32_at(blob: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(blob.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(blob: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(blob.get(at..at + 8)?.try_into().ok()?))
}

/// The DSP arch in the HTP context metadata: `{u32 version = 1, u32 arch}`.
fn dsp_arch_of(context_metadata: &[u8]) -> Option<u32> {
    (u32_at(context_metadata, 0)? == 1).then(|| u32_at(context_metadata, 4))?
}

/// The spill-fill buffer size in an HTP graph blob info: version 1 (`u32` at 0), the size a
/// `u64` at 8 (`QnnHtpSystemContext_GraphBlobInfoV1_t.spillFillBufferSize`).
fn spill_fill_size_of(graph_blob_info: &[u8]) -> Option<u64> {
    (u32_at(graph_blob_info, 0)? == 1).then(|| u64_at(graph_blob_info, 8))?
}

/// The VTCM size in an HTP graph blob info: version 1 (`u32` at 0), the size a `u64` at 16.
fn vtcm_size_of(graph_blob_info: &[u8]) -> Option<u64> {
    (u32_at(graph_blob_info, 0)? == 1).then(|| u64_at(graph_blob_info, 16))?
}

/// # Safety
/// `s` must be NULL or a NUL-terminated string owned by the System context.
unsafe fn optional_string(s: *const std::ffi::c_char, what: &str) -> Result<String> {
    if s.is_null() {
        return Ok(String::new());
    }
    // SAFETY: non-NULL and NUL-terminated per the contract.
    unsafe { read_name(s, what) }
}

/// # Safety
/// `info` must point to a `QnnSystemContext_BinaryInfo_t` produced by a System library whose
/// `GraphInfo` array stride is `stride`, valid for the duration of the call.
unsafe fn read_binary_info(
    info: *const QnnSystemContext_BinaryInfo_t,
    stride: usize,
) -> Result<BinaryMetadata> {
    // SAFETY: readable per the contract; each branch reads the union member the version selects.
    let (version, header) = unsafe {
        let version = (*info).version;
        let header = match version {
            sys::QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_1 => {
                header!((*info).info.contextBinaryInfoV1, None, NO_BLOB)
            }
            sys::QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_2 => {
                header!((*info).info.contextBinaryInfoV2, None, NO_BLOB)
            }
            sys::QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_3 => {
                let v = &(*info).info.contextBinaryInfoV3;
                header!(
                    v,
                    Some(v.socModel),
                    (v.contextMetadataSize, v.contextMetadata.cast_const())
                )
            }
            other => {
                return Err(Error::invalid_model(format!(
                    "QnnSystem reported unknown binary info version {other}"
                )));
            }
        };
        (version, header)
    };
    let (num_graphs, graphs) = (header.num_graphs, header.graphs);
    if num_graphs > MAX_GRAPHS {
        return Err(Error::invalid_model(format!(
            "the binary claims {num_graphs} graphs, above the limit of {MAX_GRAPHS}"
        )));
    }
    if num_graphs > 0 && graphs.is_null() {
        return Err(Error::invalid_model(format!(
            "the binary claims {num_graphs} graphs but lists none"
        )));
    }
    // SAFETY: the blob comes with its size from the same answer.
    let dsp_arch = unsafe { read_blob(header.context_metadata) }
        .as_deref()
        .and_then(dsp_arch_of);
    let mut vtcm_size: Option<u64> = None;
    let mut spill_fill_size: Option<u64> = None;
    let mut out: Vec<Arc<GraphMetadata>> = Vec::with_capacity(num_graphs as usize);
    for i in 0..num_graphs as usize {
        // SAFETY: `graphs` holds `num_graphs` elements of `stride` bytes.
        let element = unsafe { graphs.cast::<u8>().add(i * stride) };
        // SAFETY: `element` points to a GraphInfo of the library's layout.
        let (graph, blob) = unsafe { read_graph_info(element, stride, i) }?;
        vtcm_size = vtcm_size.max(blob.as_deref().and_then(vtcm_size_of));
        spill_fill_size = spill_fill_size.max(blob.as_deref().and_then(spill_fill_size_of));
        if out.iter().any(|g| g.info.name == graph.info.name) {
            return Err(Error::invalid_model(format!(
                "the binary lists graph {:?} twice",
                graph.info.name
            )));
        }
        out.push(Arc::new(graph));
    }
    Ok(BinaryMetadata {
        info: BinaryInfo {
            version,
            backend_id: header.backend_id,
            // SAFETY: NULL or strings owned by the System context, alive for this call.
            build_id: unsafe { optional_string(header.build_id, "the binary's build id") }?,
            core_api: header.core_api.into(),
            backend_api: header.backend_api.into(),
            // SAFETY: as above.
            soc_version: unsafe {
                optional_string(header.soc_version, "the binary's SoC version")
            }?,
            context_blob_version: header.context_blob_version.into(),
            soc_model: header.soc_model,
            dsp_arch,
            vtcm_size,
            graphs: out.iter().map(|g| g.info.clone()).collect(),
        },
        graphs: out,
        spill_fill_size,
    })
}

/// A graph's metadata and its HTP graph blob info (GraphInfo v3), if it has one.
///
/// # Safety
/// `element` must point to one `QnnSystemContext_GraphInfo_t` element of `stride` bytes.
unsafe fn read_graph_info(
    element: *const u8,
    stride: usize,
    index: usize,
) -> Result<(GraphMetadata, Option<Vec<u8>>)> {
    let header = element.cast::<sys::QnnSystemContext_GraphInfo_t>();
    // SAFETY: `version` is the first field of every layout.
    let version = unsafe { std::ptr::addr_of!((*header).version).read() };
    let known = match version {
        sys::QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_1
        | sys::QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_2 => true,
        sys::QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_3 => {
            stride >= size_of::<sys::QnnSystemContext_GraphInfo_t>()
        }
        _ => false,
    };
    if !known {
        return Err(Error::invalid_model(format!(
            "graph {index} has unknown graph info version {version}"
        )));
    }
    let blob = if version == sys::QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_3 {
        // SAFETY: a V3 element (the stride holds a whole V3 struct, checked above).
        let v3 = unsafe { std::ptr::addr_of!((*header).info.graphInfoV3).read() };
        // SAFETY: the blob comes with its size from the same answer.
        unsafe { read_blob((v3.graphBlobInfoSize, v3.graphBlobInfo.cast_const())) }
    } else {
        None
    };
    // V1, V2 and V3 share the V1 prefix, and reading only the V1 member stays inside even the
    // 64-byte elements of old System libraries.
    // SAFETY: the element holds at least a V1 struct after the version field.
    let v1 = unsafe { std::ptr::addr_of!((*header).info.graphInfoV1).read() };
    // SAFETY: the name is NULL or a NUL-terminated string owned by the System context.
    let name = unsafe { read_name(v1.graphName, &format!("graph {index}")) }?;
    let what = format!("graph {name:?}");
    // SAFETY: the arrays come from the same metadata and hold the counts they come with.
    let (inputs, input_templates) =
        unsafe { read_tensors(v1.graphInputs, v1.numGraphInputs, &format!("{what} input")) }?;
    // SAFETY: as above.
    let (outputs, output_templates) = unsafe {
        read_tensors(
            v1.graphOutputs,
            v1.numGraphOutputs,
            &format!("{what} output"),
        )
    }?;
    Ok((
        GraphMetadata {
            info: GraphInfo {
                name,
                inputs,
                outputs,
            },
            input_templates,
            output_templates,
        },
        blob,
    ))
}

/// # Safety
/// `tensors` must be NULL or hold `count` tensors (stride 144).
unsafe fn read_tensors(
    tensors: *const Qnn_Tensor_t,
    count: u32,
    what: &str,
) -> Result<(Vec<TensorInfo>, Vec<TensorTemplate>)> {
    if count > MAX_GRAPH_TENSORS {
        return Err(Error::invalid_model(format!(
            "{what}s number {count}, above the limit of {MAX_GRAPH_TENSORS}"
        )));
    }
    if count > 0 && tensors.is_null() {
        return Err(Error::invalid_model(format!(
            "{what}s number {count} but none are listed"
        )));
    }
    let mut infos = Vec::with_capacity(count as usize);
    let mut templates = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        // SAFETY: index within `count` of a non-NULL array.
        let (info, template) = unsafe { read_tensor(tensors.add(i), &format!("{what} {i}")) }?;
        if infos.iter().any(|t: &TensorInfo| t.name == info.name) {
            return Err(Error::invalid_model(format!(
                "{what} name {:?} appears twice",
                info.name
            )));
        }
        infos.push(info);
        templates.push(template);
    }
    Ok((infos, templates))
}
