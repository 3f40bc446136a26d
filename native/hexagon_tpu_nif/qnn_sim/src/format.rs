//! The qnn_sim context-binary format (version 1): encoder and bounds-checked decoder.
//!
//! Layout (all integers little-endian; `str` = `u32` byte length + UTF-8 bytes):
//!
//! ```text
//! header (32 bytes)
//!   0  [u8; 8]  magic "QNNSIMCB"
//!   8  u32      format version (1)
//!   12 u32      flags (0)
//!   16 u64      payload length (bytes after the header; must match the buffer exactly)
//!   24 u64      FNV-1a 64 of the payload
//! payload: sections, each  u32 tag | u32 body length | body
//!   tag 1 META       exactly once:  str soc_version
//!   tag 2 GRAPH      once per graph (see `encode_graph`)
//!   tag 3 BEHAVIOUR  at most once  (see `encode_behaviour`)
//!   tag 4 STAMP      at most once:  opt str build_id | opt u32 backend_id | opt u32 soc_model
//!                    | opt u32 dsp_arch   (opt = u8 0, or u8 1 and the value)
//!                    [| opt u64 spill_fill: written only when set, read when present]
//!   other tags are skipped (bodies still bounds-checked)
//! ```
//!
//! The README has the field-by-field description. Decoding never panics and never allocates
//! more than the input could describe; every decoded model then goes through
//! [`Model::validate`].

use std::fmt;

use crate::model::*;

/// First 8 bytes of every binary.
pub const MAGIC: [u8; 8] = *b"QNNSIMCB";
/// The format version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Header size in bytes.
pub const HEADER_LEN: usize = 32;

const TAG_META: u32 = 1;
const TAG_GRAPH: u32 = 2;
const TAG_BEHAVIOUR: u32 = 3;
const TAG_STAMP: u32 = 4;

/// Why a buffer is not a readable binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// Truncated, corrupt, wrong magic, bad checksum or an ill-formed model.
    Malformed(String),
    /// A well-formed header with a format version this build does not read.
    UnsupportedVersion(u32),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Malformed(m) => write!(f, "malformed qnn_sim binary: {m}"),
            FormatError::UnsupportedVersion(v) => {
                write!(
                    f,
                    "qnn_sim binary format version {v} (this build reads {FORMAT_VERSION})"
                )
            }
        }
    }
}

impl std::error::Error for FormatError {}

fn malformed(m: impl Into<String>) -> FormatError {
    FormatError::Malformed(m.into())
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

// ---------------------------------------------------------------------------------------------
// Encoding

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f32(&mut self, v: f32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).expect("qnn_sim format: length above u32::MAX"));
    }
    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn opt_str(&mut self, s: &Option<String>) {
        match s {
            None => self.u8(0),
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
        }
    }
    fn indices(&mut self, v: &[u32]) {
        self.len(v.len());
        for &i in v {
            self.u32(i);
        }
    }
    fn section(&mut self, tag: u32, body: Writer) {
        self.u32(tag);
        self.bytes(&body.0);
    }
}

fn encode_quant(w: &mut Writer, q: &Quant) {
    match q {
        Quant::None => {
            w.u8(0);
            w.u8(0);
        }
        Quant::PerTensor {
            scale,
            offset,
            bitwidth,
        } => {
            w.u8(1);
            w.u8(bitwidth.unwrap_or(0) as u8);
            w.f32(*scale);
            w.i32(*offset);
        }
        Quant::PerAxis {
            axis,
            scales,
            offsets,
            bitwidth,
        } => {
            w.u8(2);
            w.u8(bitwidth.unwrap_or(0) as u8);
            w.u32(*axis);
            w.len(scales.len());
            for (s, o) in scales.iter().zip(offsets) {
                w.f32(*s);
                w.i32(*o);
            }
        }
    }
}

fn encode_graph(g: &GraphDef) -> Writer {
    let mut w = Writer(Vec::new());
    w.str(&g.name);
    w.len(g.tensors.len());
    for t in &g.tensors {
        w.u32(t.id);
        w.str(&t.name);
        w.u8(t.kind.code());
        w.u32(t.spec.dtype.code());
        w.u8(t.spec.dims.len() as u8);
        for &d in &t.spec.dims {
            w.u32(d);
        }
        encode_quant(&mut w, &t.spec.quant);
        w.bytes(&t.data);
    }
    w.indices(&g.inputs);
    w.indices(&g.outputs);
    w.len(g.nodes.len());
    for n in &g.nodes {
        w.u32(n.op.code());
        w.str(&n.name);
        match n.op {
            Op::Softmax { beta } => {
                w.u32(1);
                w.f32(beta);
            }
            _ => w.u32(0),
        }
        w.indices(&n.inputs);
        w.indices(&n.outputs);
    }
    w
}

fn encode_fault(w: &mut Writer, f: &Option<Fault>) {
    let Some(f) = f else {
        w.u8(0);
        return;
    };
    w.u8(1);
    w.u32(f.code);
    w.u64(f.after);
    w.u8(u8::from(f.times.is_some()));
    w.u64(f.times.unwrap_or(0));
    w.u8(match f.scope {
        FaultScope::Library => 0,
        FaultScope::Context => 1,
    });
    w.opt_str(&f.graph);
}

fn encode_behaviour(b: &Behaviour) -> Writer {
    let mut w = Writer(Vec::new());
    w.u32(b.binary_info_version);
    w.u32(b.graph_info_version);
    w.u32(b.tensor_version);
    w.u32(b.sleep_ms);
    encode_fault(&mut w, &b.fail_execute);
    encode_fault(&mut w, &b.fail_context_create);
    w.len(b.adversarial.len());
    for a in &b.adversarial {
        w.u32(a.kind.code());
        w.opt_str(&a.graph);
        w.opt_str(&a.tensor);
    }
    w
}

/// Serializes a model (without validating it; see [`crate::builder`] for the checked route).
pub fn encode(model: &Model) -> Vec<u8> {
    encode_with_version(model, FORMAT_VERSION)
}

/// Serializes with an arbitrary format version in the header (to test version rejection).
pub fn encode_with_version(model: &Model, version: u32) -> Vec<u8> {
    let mut payload = Writer(Vec::new());
    let mut meta = Writer(Vec::new());
    meta.str(&model.soc_version);
    payload.section(TAG_META, meta);
    for g in &model.graphs {
        payload.section(TAG_GRAPH, encode_graph(g));
    }
    payload.section(TAG_BEHAVIOUR, encode_behaviour(&model.behaviour));
    if model.stamp != Stamp::default() {
        let mut w = Writer(Vec::new());
        w.opt_str(&model.stamp.build_id);
        for v in [
            model.stamp.backend_id,
            model.stamp.soc_model,
            model.stamp.dsp_arch,
        ] {
            w.u8(u8::from(v.is_some()));
            w.u32(v.unwrap_or(0));
        }
        if let Some(spill_fill) = model.stamp.spill_fill {
            w.u8(1);
            w.u64(spill_fill);
        }
        payload.section(TAG_STAMP, w);
    }
    let mut out = Writer(Vec::with_capacity(HEADER_LEN + payload.0.len()));
    out.0.extend_from_slice(&MAGIC);
    out.u32(version);
    out.u32(0);
    out.u64(payload.0.len() as u64);
    out.u64(fnv1a64(&payload.0));
    out.0.extend_from_slice(&payload.0);
    out.0
}

// ---------------------------------------------------------------------------------------------
// Decoding

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, FormatError>;

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        if n > self.remaining() {
            return Err(malformed(format!(
                "truncated: need {n} bytes at offset {}, {} left",
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> R<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> R<u8> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> R<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> R<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn i32(&mut self) -> R<i32> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    fn f32(&mut self) -> R<f32> {
        Ok(f32::from_le_bytes(self.array()?))
    }
    /// A count of items each at least `min_item` bytes long, checked against what is left.
    fn count(&mut self, min_item: usize) -> R<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item) > self.remaining() {
            return Err(malformed(format!(
                "count {n} at offset {} exceeds the data",
                self.pos - 4
            )));
        }
        Ok(n)
    }
    fn bytes(&mut self) -> R<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn str(&mut self) -> R<String> {
        let b = self.bytes()?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| malformed("string is not UTF-8"))
    }
    fn opt_str(&mut self) -> R<Option<String>> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.str()?)),
            t => Err(malformed(format!("bad option tag {t}"))),
        }
    }
    fn indices(&mut self) -> R<Vec<u32>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.u32()).collect()
    }
    fn finish(&self, what: &str) -> R<()> {
        if self.remaining() != 0 {
            return Err(malformed(format!(
                "{} trailing bytes in {what}",
                self.remaining()
            )));
        }
        Ok(())
    }
}

fn decode_quant(r: &mut Reader<'_>) -> R<Quant> {
    let tag = r.u8()?;
    let bw = match r.u8()? {
        0 => None,
        b => Some(u32::from(b)),
    };
    match tag {
        0 if bw.is_none() => Ok(Quant::None),
        1 => Ok(Quant::PerTensor {
            scale: r.f32()?,
            offset: r.i32()?,
            bitwidth: bw,
        }),
        2 => {
            let axis = r.u32()?;
            let n = r.count(8)?;
            let mut scales = Vec::with_capacity(n);
            let mut offsets = Vec::with_capacity(n);
            for _ in 0..n {
                scales.push(r.f32()?);
                offsets.push(r.i32()?);
            }
            Ok(Quant::PerAxis {
                axis,
                scales,
                offsets,
                bitwidth: bw,
            })
        }
        _ => Err(malformed(format!("bad quantization tag {tag}"))),
    }
}

fn decode_graph(r: &mut Reader<'_>) -> R<GraphDef> {
    let name = r.str()?;
    let n = r.count(20)?;
    let mut tensors = Vec::with_capacity(n);
    for _ in 0..n {
        let id = r.u32()?;
        let name = r.str()?;
        let kind = TensorKind::from_code(r.u8()?).ok_or_else(|| malformed("bad tensor kind"))?;
        let code = r.u32()?;
        let dtype = DType::from_code(code)
            .ok_or_else(|| malformed(format!("unknown dtype {code:#06x}")))?;
        let rank = r.u8()? as usize;
        if rank > MAX_RANK {
            return Err(malformed(format!("rank {rank} above {MAX_RANK}")));
        }
        let dims = (0..rank).map(|_| r.u32()).collect::<R<Vec<u32>>>()?;
        let quant = decode_quant(r)?;
        let data = r.bytes()?.to_vec();
        tensors.push(TensorDef {
            id,
            name,
            kind,
            spec: TensorSpec { dtype, dims, quant },
            data,
        });
    }
    let inputs = r.indices()?;
    let outputs = r.indices()?;
    let n = r.count(20)?;
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        let code = r.u32()?;
        let name = r.str()?;
        let np = r.count(4)?;
        let params = (0..np).map(|_| r.f32()).collect::<R<Vec<f32>>>()?;
        let op = match (code, params.as_slice()) {
            (1, []) => Op::Identity,
            (2, []) => Op::Add,
            (3, []) => Op::Mul,
            (4, []) => Op::Relu,
            (5, []) => Op::FullyConnected,
            (6, [beta]) => Op::Softmax { beta: *beta },
            (7, []) => Op::Reshape,
            _ => return Err(malformed(format!("unknown op {code} with {np} parameters"))),
        };
        let inputs = r.indices()?;
        let outputs = r.indices()?;
        nodes.push(Node {
            name,
            op,
            inputs,
            outputs,
        });
    }
    Ok(GraphDef {
        name,
        tensors,
        inputs,
        outputs,
        nodes,
    })
}

fn decode_fault(r: &mut Reader<'_>) -> R<Option<Fault>> {
    match r.u8()? {
        0 => return Ok(None),
        1 => {}
        t => return Err(malformed(format!("bad fault tag {t}"))),
    }
    let code = r.u32()?;
    let after = r.u64()?;
    let has_times = r.u8()?;
    let times = r.u64()?;
    let scope = match r.u8()? {
        0 => FaultScope::Library,
        1 => FaultScope::Context,
        s => return Err(malformed(format!("bad fault scope {s}"))),
    };
    let graph = r.opt_str()?;
    let times = match has_times {
        0 => None,
        1 => Some(times),
        t => return Err(malformed(format!("bad fault tag {t}"))),
    };
    Ok(Some(Fault {
        code,
        after,
        times,
        scope,
        graph,
    }))
}

fn decode_behaviour(r: &mut Reader<'_>) -> R<Behaviour> {
    let binary_info_version = r.u32()?;
    let graph_info_version = r.u32()?;
    let tensor_version = r.u32()?;
    let sleep_ms = r.u32()?;
    let fail_execute = decode_fault(r)?;
    let fail_context_create = decode_fault(r)?;
    let n = r.count(6)?;
    let mut adversarial = Vec::with_capacity(n);
    for _ in 0..n {
        let code = r.u32()?;
        let kind = AdversarialKind::from_code(code)
            .ok_or_else(|| malformed(format!("unknown adversarial option {code}")))?;
        adversarial.push(Adversarial {
            kind,
            graph: r.opt_str()?,
            tensor: r.opt_str()?,
        });
    }
    Ok(Behaviour {
        binary_info_version,
        graph_info_version,
        tensor_version,
        sleep_ms,
        fail_execute,
        fail_context_create,
        adversarial,
    })
}

/// Checks the header and returns the payload checksum (the model's identity).
pub fn read_header(bytes: &[u8]) -> Result<u64, FormatError> {
    if bytes.is_empty() {
        return Err(malformed("empty buffer"));
    }
    let mut r = Reader::new(bytes);
    if bytes.len() < 12 || r.array::<8>()? != MAGIC {
        return Err(malformed("not a qnn_sim context binary (bad magic)"));
    }
    let version = r.u32()?;
    if version != FORMAT_VERSION {
        return Err(FormatError::UnsupportedVersion(version));
    }
    if r.u32()? != 0 {
        return Err(malformed("unknown header flags"));
    }
    let len = r.u64()?;
    let sum = r.u64()?;
    if len != r.remaining() as u64 {
        return Err(malformed(format!(
            "payload length {len} but {} bytes follow the header",
            r.remaining()
        )));
    }
    if fnv1a64(&bytes[HEADER_LEN..]) != sum {
        return Err(malformed("checksum mismatch"));
    }
    Ok(sum)
}

/// Parses and validates a binary.
pub fn decode(bytes: &[u8]) -> Result<Model, FormatError> {
    read_header(bytes)?;
    let mut r = Reader::new(&bytes[HEADER_LEN..]);
    let mut soc = None;
    let mut graphs = Vec::new();
    let mut behaviour = None;
    let mut stamp = None;
    while r.remaining() > 0 {
        let tag = r.u32()?;
        let body = r.bytes()?;
        let mut s = Reader::new(body);
        match tag {
            TAG_META => {
                if soc.is_some() {
                    return Err(malformed("two META sections"));
                }
                soc = Some(s.str()?);
                s.finish("META")?;
            }
            TAG_GRAPH => {
                graphs.push(decode_graph(&mut s)?);
                s.finish("GRAPH")?;
            }
            TAG_BEHAVIOUR => {
                if behaviour.is_some() {
                    return Err(malformed("two BEHAVIOUR sections"));
                }
                behaviour = Some(decode_behaviour(&mut s)?);
                s.finish("BEHAVIOUR")?;
            }
            TAG_STAMP => {
                if stamp.is_some() {
                    return Err(malformed("two STAMP sections"));
                }
                let build_id = s.opt_str()?;
                let mut opt = || -> R<Option<u32>> {
                    let has = s.u8()?;
                    let v = s.u32()?;
                    match has {
                        0 => Ok(None),
                        1 => Ok(Some(v)),
                        t => Err(malformed(format!("bad STAMP tag {t}"))),
                    }
                };
                let (backend_id, soc_model, dsp_arch) = (opt()?, opt()?, opt()?);
                let spill_fill = if s.remaining() > 0 {
                    match (s.u8()?, s.u64()?) {
                        (1, v) => Some(v),
                        (t, _) => return Err(malformed(format!("bad STAMP tag {t}"))),
                    }
                } else {
                    None
                };
                stamp = Some(Stamp {
                    build_id,
                    backend_id,
                    soc_model,
                    dsp_arch,
                    spill_fill,
                });
                s.finish("STAMP")?;
            }
            _ => {} // unknown section: skipped
        }
    }
    let model = Model {
        soc_version: soc.ok_or_else(|| malformed("no META section"))?,
        stamp: stamp.unwrap_or_default(),
        graphs,
        behaviour: behaviour.unwrap_or_default(),
    };
    model.validate().map_err(|e| malformed(e.0))?;
    Ok(model)
}
