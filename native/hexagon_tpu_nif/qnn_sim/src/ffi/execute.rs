//! `QnnGraph_execute`: checks the caller's tensors against the graph, applies the model's
//! sleeps and faults, counts overlaps and concurrency, and runs the graph's numerics.

use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use qnn_sys::*;

use super::state::*;
use crate::model::{FaultScope, GraphDef};
use crate::numerics;

/// Marks one execute in flight (for the peak counter) until dropped; then also leaves the
/// graph's counter it was counted in (`running` for `graphExecute`, `async_running` for the
/// asynchronous worker), which the caller incremented.
pub(super) struct InFlight<'a>(&'a AtomicU32);

impl<'a> InFlight<'a> {
    pub(super) fn enter(graph_counter: &'a AtomicU32) -> InFlight<'a> {
        let now = EXECUTES_IN_FLIGHT.fetch_add(1, Ordering::SeqCst) + 1;
        PEAK_CONCURRENT_EXECUTES.fetch_max(now, Ordering::SeqCst);
        InFlight(graph_counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        EXECUTES_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A caller tensor's fields, whatever its version.
struct CallerTensor {
    id: u32,
    name: *const c_char,
    data_type: u32,
    rank: u32,
    dims: *const u32,
    mem_type: u32,
    data: *mut c_void,
    size: u32,
    /// `QNN_TENSORMEMTYPE_MEMHANDLE`'s handle (NULL otherwise).
    handle: Qnn_MemHandle_t,
}

/// # Safety
/// `t` must point to a readable `Qnn_Tensor_t`.
unsafe fn read_tensor(t: *const Qnn_Tensor_t) -> Option<CallerTensor> {
    // SAFETY: the caller guarantees a readable tensor; the union member read matches `version`
    // (both versions share the first 112 bytes, and only those are read).
    unsafe {
        let t = &*t;
        let v1 = match t.version {
            QNN_TENSOR_VERSION_1 => t.tensor.v1,
            QNN_TENSOR_VERSION_2 => {
                let v2 = t.tensor.v2;
                Qnn_TensorV1_t {
                    id: v2.id,
                    name: v2.name,
                    type_: v2.type_,
                    dataFormat: v2.dataFormat,
                    dataType: v2.dataType,
                    quantizeParams: v2.quantizeParams,
                    rank: v2.rank,
                    dimensions: v2.dimensions,
                    memType: v2.memType,
                    memory: v2.memory,
                }
            }
            _ => return None,
        };
        let (data, size) = if v1.memType == QNN_TENSORMEMTYPE_RAW {
            (v1.memory.clientBuf.data, v1.memory.clientBuf.dataSize)
        } else {
            (std::ptr::null_mut(), 0)
        };
        let handle = if v1.memType == QNN_TENSORMEMTYPE_MEMHANDLE {
            v1.memory.memHandle
        } else {
            std::ptr::null_mut()
        };
        Some(CallerTensor {
            id: v1.id,
            name: v1.name,
            data_type: v1.dataType,
            rank: v1.rank,
            dims: v1.dimensions,
            mem_type: v1.memType,
            data,
            size,
            handle,
        })
    }
}

/// Why a caller's tensors do not match the graph's.
enum Mismatch {
    /// Any other mismatch (`QNN_GRAPH_ERROR_INVALID_TENSOR`).
    Tensor,
    /// A MEMHANDLE tensor naming no live registration of the graph's context (also answered
    /// `QNN_GRAPH_ERROR_INVALID_TENSOR`, and counted by [`super::mem::STALE_USES`]).
    Stale,
}

/// Matches the caller's tensors to the graph's (by id; name, type, shape and buffer checked)
/// and returns, per graph tensor in graph order, the caller's (pointer, size): a RAW tensor's
/// client buffer, or a MEMHANDLE tensor's registered mapping (its region pushed to `regions`,
/// which keeps it mapped until the execute ends).
///
/// # Safety
/// `tensors` must be NULL or point to `n` readable tensors whose name/dims pointers are NULL
/// or valid for what they describe.
unsafe fn match_tensors(
    g: &GraphDef,
    context: u64,
    list: &[u32],
    tensors: *const Qnn_Tensor_t,
    n: u32,
    regions: &mut Vec<Arc<super::mem::Region>>,
) -> Result<Vec<(*mut c_void, usize)>, Mismatch> {
    if n as usize != list.len() || (n > 0 && tensors.is_null()) {
        return Err(Mismatch::Tensor);
    }
    let mut found: Vec<Option<(*mut c_void, usize)>> = vec![None; list.len()];
    for k in 0..n as usize {
        // SAFETY: `k < n` and the caller guarantees `n` readable tensors.
        let t = unsafe { read_tensor(tensors.add(k)) }.ok_or(Mismatch::Tensor)?;
        let pos = list
            .iter()
            .position(|&i| g.tensor(i).id == t.id)
            .ok_or(Mismatch::Tensor)?;
        let def = g.tensor(list[pos]);
        if found[pos].is_some() {
            return Err(Mismatch::Tensor); // the same tensor twice
        }
        if !t.name.is_null() {
            // SAFETY: non-NULL; the caller's tensor names are NUL-terminated strings.
            let name = unsafe { CStr::from_ptr(t.name) };
            if name.to_bytes() != def.name.as_bytes() {
                return Err(Mismatch::Tensor);
            }
        }
        if t.data_type != def.spec.dtype.code() || t.rank as usize != def.spec.dims.len() {
            return Err(Mismatch::Tensor);
        }
        if t.rank > 0 {
            if t.dims.is_null() {
                return Err(Mismatch::Tensor);
            }
            // SAFETY: non-NULL and the caller's dims array has `rank` entries.
            let dims = unsafe { std::slice::from_raw_parts(t.dims, t.rank as usize) };
            if dims != def.spec.dims.as_slice() {
                return Err(Mismatch::Tensor);
            }
        }
        let expected = def.spec.byte_size().ok_or(Mismatch::Tensor)?;
        match t.mem_type {
            QNN_TENSORMEMTYPE_RAW if !t.data.is_null() && t.size as usize == expected => {
                found[pos] = Some((t.data, expected));
            }
            QNN_TENSORMEMTYPE_MEMHANDLE => {
                let region = super::mem::resolve(t.handle, context).ok_or(Mismatch::Stale)?;
                if region.len < expected {
                    return Err(Mismatch::Tensor);
                }
                found[pos] = Some((region.ptr(), expected));
                regions.push(region);
            }
            _ => return Err(Mismatch::Tensor),
        }
    }
    found
        .into_iter()
        .collect::<Option<_>>()
        .ok_or(Mismatch::Tensor)
}

/// A graph handle's object, or `QNN_GRAPH_ERROR_INVALID_HANDLE`.
pub(super) fn lookup_graph(graph: Qnn_GraphHandle_t) -> Result<Arc<GraphObj>, Qnn_ErrorHandle_t> {
    match registry().get(handle_id(graph), Kind::Graph) {
        // After a DSP restart, at once, until its context is freed and created again.
        Some(Obj::Graph(g)) if super::ssr::is_dead(&g.dead) => Err(super::ssr::code()),
        Some(Obj::Graph(g)) => Ok(Arc::clone(g)),
        _ => Err(err(QNN_GRAPH_ERROR_INVALID_HANDLE)),
    }
}

/// A checked execute: the graph and, in graph order, the caller's (buffer, byte size) of each
/// input and output.
pub(super) struct Prepared {
    pub graph: Arc<GraphObj>,
    ins: Vec<(*mut c_void, usize)>,
    outs: Vec<(*mut c_void, usize)>,
    /// The registrations MEMHANDLE tensors named: kept mapped until the execute ends.
    regions: Vec<Arc<super::mem::Region>>,
}

// SAFETY: the pointers are the caller's client buffers, which QNN's contract keeps valid (and
// unused by the caller) until the execute is answered, whichever thread runs it, or mappings
// of registered memory that `regions` keeps mapped as long as the `Prepared` lives.
unsafe impl Send for Prepared {}

/// Matches the caller's tensors with the graph's (`QNN_GRAPH_ERROR_INVALID_TENSOR` for any
/// mismatch, a stale memory handle included).
///
/// # Safety
/// As for `QnnGraph_execute`'s tensors.
pub(super) unsafe fn prepare(
    g: &Arc<GraphObj>,
    inputs: *const Qnn_Tensor_t,
    num_inputs: u32,
    outputs: *mut Qnn_Tensor_t,
    num_outputs: u32,
) -> Result<Prepared, Qnn_ErrorHandle_t> {
    let def = &g.model.graphs[g.index];
    let mut regions = Vec::new();
    // SAFETY: forwarded caller contract for `inputs`.
    let ins = unsafe {
        match_tensors(
            def,
            g.context,
            &def.inputs,
            inputs,
            num_inputs,
            &mut regions,
        )
    };
    let outs = ins.and_then(|ins| {
        // SAFETY: forwarded caller contract for `outputs`.
        unsafe {
            match_tensors(
                def,
                g.context,
                &def.outputs,
                outputs,
                num_outputs,
                &mut regions,
            )
        }
        .map(|outs| (ins, outs))
    });
    let Ok((ins, outs)) = outs else {
        return Err(err(QNN_GRAPH_ERROR_INVALID_TENSOR));
    };
    Ok(Prepared {
        graph: Arc::clone(g),
        ins,
        outs,
        regions,
    })
}

/// Runs a checked execute: the `log_per_execute` lines, the model's `sleep_ms` and
/// `fail_execute`, the numerics, and the outputs written into the caller's buffers.
pub(super) fn run(g: &GraphObj, p: &Prepared) -> Qnn_ErrorHandle_t {
    let def = &g.model.graphs[g.index];
    // A queued execute whose context a restart killed meanwhile.
    if super::ssr::is_dead(&g.dead) {
        return super::ssr::code();
    }
    let lines = knobs().log_per_execute;
    if lines > 0 {
        let reg = registry();
        if let Some(Obj::Context(c)) = reg.get(g.context, Kind::Context) {
            for n in 0..lines {
                let line = CString::new(format!("execute line {n} of graph {}", def.name))
                    .unwrap_or_default();
                reg.log(c.backend, QNN_LOG_LEVEL_WARN, &line);
            }
        }
    }
    let b = &g.model.behaviour;
    if b.sleep_ms > 0 {
        std::thread::sleep(Duration::from_millis(u64::from(b.sleep_ms)));
    }
    // Paused: look again soon (the knob signals nothing).
    while knobs().execute_paused {
        std::thread::sleep(Duration::from_millis(1));
    }
    if let Some(restart) = super::ssr::on_execute(g.device) {
        return restart;
    }
    // Deregistered (or its context freed) while the execute waited in a queue.
    if p.regions.iter().any(|r| !r.is_live()) {
        super::mem::count_stale();
        return err(QNN_GRAPH_ERROR_INVALID_TENSOR);
    }
    if let Some(f) = &b.fail_execute
        && f.graph.as_ref().is_none_or(|name| *name == def.name)
    {
        let n = match f.scope {
            FaultScope::Library => next_fault_call(g.checksum, FAULT_EXECUTE, &def.name),
            FaultScope::Context => g.calls.fetch_add(1, Ordering::SeqCst),
        };
        if f.fires(n) {
            return err(f.code);
        }
    }
    // Inputs are copied before outputs are written, so overlapping caller buffers cannot
    // alias a live Rust reference.
    let in_bytes: Vec<Vec<u8>> = p
        .ins
        .iter()
        // SAFETY: each pointer is non-NULL with exactly `len` readable bytes (checked against
        // the caller's dataSize), valid until the execute is answered.
        .map(|&(ptr, len)| unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }.to_vec())
        .collect();
    let refs: Vec<&[u8]> = in_bytes.iter().map(Vec::as_slice).collect();
    let results = numerics::run_graph(def, &refs);
    for ((ptr, len), r) in p.outs.iter().zip(&results) {
        let n = (*len).min(r.len());
        // SAFETY: the caller's output buffer is writable for `len` bytes; `r` is our own
        // vector, so the ranges cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(r.as_ptr(), ptr.cast::<u8>(), n) };
    }
    if !p.regions.is_empty() {
        super::mem::MEMHANDLE_EXECUTES.fetch_add(1, Ordering::SeqCst);
    }
    0
}

/// `QnnGraph_execute`. Validates the tensors (6004), detects a concurrent execute on the same
/// graph (6000, counted by `QnnSim_executeOverlaps`; the asynchronous worker's execute counts),
/// sleeps and fails as the model's behaviour says, computes, and writes outputs into the
/// caller's buffers.
///
/// # Safety
/// `inputs`/`outputs` must be NULL or point to `num_inputs`/`num_outputs` tensors whose RAW
/// client buffers are valid for `dataSize` bytes (inputs readable, outputs writable); a
/// MEMHANDLE tensor's handle is looked up, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn QnnGraph_execute(
    graph: Qnn_GraphHandle_t,
    inputs: *const Qnn_Tensor_t,
    num_inputs: u32,
    outputs: *mut Qnn_Tensor_t,
    num_outputs: u32,
    profile: Qnn_ProfileHandle_t,
    signal: Qnn_SignalHandle_t,
) -> Qnn_ErrorHandle_t {
    guard(|| {
        let g = match lookup_graph(graph) {
            Ok(g) => g,
            Err(e) => return e,
        };
        if let Err(e) = super::profile::check_handle(profile) {
            return e;
        }
        EXECUTE_COUNT.fetch_add(1, Ordering::SeqCst);
        // Each side raises its own counter before it reads the other's, so of two executes
        // that overlap at least one sees the other.
        if g.running.fetch_add(1, Ordering::SeqCst) > 0
            || g.async_running.load(Ordering::SeqCst) > 0
        {
            g.running.fetch_sub(1, Ordering::SeqCst);
            EXECUTE_OVERLAPS.fetch_add(1, Ordering::SeqCst);
            return err(QNN_GRAPH_ERROR_INVALID_ARGUMENT);
        }
        let _in_flight = InFlight::enter(&g.running);
        if !signal.is_null() {
            return err(QNN_COMMON_ERROR_NOT_SUPPORTED);
        }
        // SAFETY: forwarded caller contract for the tensors.
        match unsafe { prepare(&g, inputs, num_inputs, outputs, num_outputs) } {
            Ok(p) => {
                let status = run(&g, &p);
                if status == 0 {
                    super::profile::record_execute(profile, &g.model.graphs[g.index]);
                }
                status
            }
            Err(e) => e,
        }
    })
}
