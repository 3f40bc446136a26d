//! [`Model::validate`]: the one place that decides whether a model is well formed (names, types,
//! shapes, quantization, constant sizes, node arity and shapes, execution order, behaviour).

use std::collections::HashSet;

use super::*;

macro_rules! bail {
    ($($arg:tt)*) => { return Err(ModelError(format!($($arg)*))) };
}

impl Model {
    /// Checks everything the backend relies on: names, types, shapes, quantization, constant
    /// sizes, node arity and shapes, execution order, behaviour values.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.graphs.is_empty() {
            bail!("model has no graph");
        }
        let mut names = HashSet::new();
        for g in &self.graphs {
            if !names.insert(g.name.as_str()) {
                bail!("duplicate graph name {:?}", g.name);
            }
            validate_graph(g).map_err(|e| ModelError(format!("graph {:?}: {}", g.name, e.0)))?;
        }
        let b = &self.behaviour;
        if !(1..=3).contains(&b.binary_info_version) {
            bail!(
                "binary_info_version must be 1, 2 or 3 (got {})",
                b.binary_info_version
            );
        }
        if !(1..=3).contains(&b.graph_info_version) {
            bail!(
                "graph_info_version must be 1, 2 or 3 (got {})",
                b.graph_info_version
            );
        }
        if !(1..=2).contains(&b.tensor_version) {
            bail!("tensor_version must be 1 or 2 (got {})", b.tensor_version);
        }
        for f in [&b.fail_execute, &b.fail_context_create]
            .into_iter()
            .flatten()
        {
            if f.code == 0 || f.code > 0xFFFF {
                bail!("fault code must be in 1..=65535 (got {})", f.code);
            }
            if let Some(g) = &f.graph
                && self.graph(g).is_none()
            {
                bail!("fault names unknown graph {g:?}");
            }
        }
        for a in &b.adversarial {
            let g = match &a.graph {
                Some(name) => match self.graph(name) {
                    Some(g) => g,
                    None => bail!("adversarial option names unknown graph {name:?}"),
                },
                None => &self.graphs[0],
            };
            if let Some(t) = &a.tensor
                && !g.input_defs().chain(g.output_defs()).any(|d| &d.name == t)
            {
                bail!(
                    "adversarial option names unknown input/output {t:?} of graph {:?}",
                    g.name
                );
            }
        }
        Ok(())
    }
}

fn validate_spec(spec: &TensorSpec) -> Result<(), ModelError> {
    if spec.dims.len() > MAX_RANK {
        bail!("rank {} above {}", spec.dims.len(), MAX_RANK);
    }
    if spec.dims.contains(&0) {
        bail!("zero dimension in {:?}", spec.dims);
    }
    match spec.byte_size() {
        Some(n) if n <= u32::MAX as usize => {}
        _ => bail!(
            "byte size of {:?} x {} overflows 32 bits",
            spec.dims,
            spec.dtype
        ),
    }
    let check_scale = |s: f32| -> Result<(), ModelError> {
        if !(s.is_finite() && s > 0.0) {
            bail!("scale must be finite and > 0 (got {s})");
        }
        Ok(())
    };
    match &spec.quant {
        Quant::None => {
            if spec.dtype.is_fixed_point() {
                bail!("{} needs quantization parameters", spec.dtype);
            }
        }
        Quant::PerTensor { scale, .. } => {
            if !spec.dtype.is_fixed_point() {
                bail!(
                    "{} cannot carry quantization (use a fixed-point type)",
                    spec.dtype
                );
            }
            check_scale(*scale)?;
        }
        Quant::PerAxis {
            axis,
            scales,
            offsets,
            ..
        } => {
            if !spec.dtype.is_fixed_point() {
                bail!(
                    "{} cannot carry quantization (use a fixed-point type)",
                    spec.dtype
                );
            }
            let Some(&n) = spec.dims.get(*axis as usize) else {
                bail!(
                    "quantization axis {axis} out of range for rank {}",
                    spec.dims.len()
                );
            };
            if scales.len() != n as usize || offsets.len() != n as usize {
                bail!(
                    "per-axis quantization has {} scales / {} offsets, axis {axis} has size {n}",
                    scales.len(),
                    offsets.len()
                );
            }
            for &s in scales {
                check_scale(s)?;
            }
        }
    }
    if let Some(bw) = spec.quant.bitwidth()
        && !(1..=spec.dtype.bits()).contains(&bw)
    {
        bail!("bitwidth {bw} does not fit {}", spec.dtype);
    }
    Ok(())
}

fn broadcast_ok(a: &[u32], b: &[u32], out: &[u32]) -> bool {
    let rank = a.len().max(b.len());
    if out.len() != rank {
        return false;
    }
    (0..rank).all(|i| {
        let get = |d: &[u32]| {
            let off = rank - d.len();
            if i < off { 1 } else { d[i - off] }
        };
        let (x, y, o) = (get(a), get(b), out[i]);
        (x == o || x == 1) && (y == o || y == 1) && o == x.max(y)
    })
}

fn validate_graph(g: &GraphDef) -> Result<(), ModelError> {
    if g.name.is_empty() {
        bail!("empty graph name");
    }
    if g.name.contains('\0') {
        bail!("graph name contains NUL");
    }
    let n = g.tensors.len();
    let mut ids = HashSet::new();
    let mut names = HashSet::new();
    for t in &g.tensors {
        if t.id == 0 || !ids.insert(t.id) {
            bail!("tensor {:?} has a zero or duplicate id {}", t.name, t.id);
        }
        if t.name.is_empty() || t.name.contains('\0') || !names.insert(t.name.as_str()) {
            bail!(
                "tensor name {:?} is empty, contains NUL or is duplicated",
                t.name
            );
        }
        validate_spec(&t.spec).map_err(|e| ModelError(format!("tensor {:?}: {}", t.name, e.0)))?;
        if t.kind == TensorKind::Constant {
            if Some(t.data.len()) != t.spec.byte_size() {
                bail!(
                    "constant {:?} has {} bytes of data, its type needs {:?}",
                    t.name,
                    t.data.len(),
                    t.spec.byte_size()
                );
            }
        } else if !t.data.is_empty() {
            bail!("non-constant tensor {:?} carries data", t.name);
        }
    }
    let check_list = |list: &[u32], kind: TensorKind, what: &str| -> Result<(), ModelError> {
        let mut seen = HashSet::new();
        for &i in list {
            if i as usize >= n || !seen.insert(i) {
                bail!("{what} list has a bad or repeated tensor index {i}");
            }
            if g.tensors[i as usize].kind != kind {
                bail!(
                    "{what} {:?} is not of kind {kind:?}",
                    g.tensors[i as usize].name
                );
            }
        }
        let count = g.tensors.iter().filter(|t| t.kind == kind).count();
        if count != list.len() {
            bail!(
                "{count} tensors of kind {kind:?} but {} listed as {what}s",
                list.len()
            );
        }
        Ok(())
    };
    check_list(&g.inputs, TensorKind::Input, "input")?;
    check_list(&g.outputs, TensorKind::Output, "output")?;
    if g.outputs.is_empty() {
        bail!("graph has no output");
    }
    // Execution order: a node may read inputs, constants and tensors produced earlier; each
    // output/intermediate is produced exactly once.
    let mut ready: Vec<bool> = g
        .tensors
        .iter()
        .map(|t| matches!(t.kind, TensorKind::Input | TensorKind::Constant))
        .collect();
    for node in &g.nodes {
        let ctx = |e: ModelError| {
            ModelError(format!(
                "node {:?} ({}): {}",
                node.name,
                node.op.name(),
                e.0
            ))
        };
        for &i in node.inputs.iter().chain(&node.outputs) {
            if i as usize >= n {
                return Err(ctx(ModelError(format!("tensor index {i} out of range"))));
            }
        }
        for &i in &node.inputs {
            if !ready[i as usize] {
                return Err(ctx(ModelError(format!(
                    "reads {:?} before it is produced",
                    g.tensors[i as usize].name
                ))));
            }
        }
        for &o in &node.outputs {
            let t = &g.tensors[o as usize];
            if ready[o as usize] || !matches!(t.kind, TensorKind::Output | TensorKind::Intermediate)
            {
                return Err(ctx(ModelError(format!(
                    "writes {:?}, which is an input, a constant or already produced",
                    t.name
                ))));
            }
            ready[o as usize] = true;
        }
        validate_node(g, node).map_err(ctx)?;
    }
    for (i, t) in g.tensors.iter().enumerate() {
        if matches!(t.kind, TensorKind::Output | TensorKind::Intermediate) && !ready[i] {
            bail!("tensor {:?} is never produced", t.name);
        }
    }
    Ok(())
}

fn validate_node(g: &GraphDef, node: &Node) -> Result<(), ModelError> {
    let spec = |i: u32| &g.tensors[i as usize].spec;
    let arity = |ins: std::ops::RangeInclusive<usize>| -> Result<(), ModelError> {
        if !ins.contains(&node.inputs.len()) || node.outputs.len() != 1 {
            bail!(
                "takes {ins:?} inputs and 1 output, got {} and {}",
                node.inputs.len(),
                node.outputs.len()
            );
        }
        Ok(())
    };
    match node.op {
        Op::Identity | Op::Relu => {
            arity(1..=1)?;
            if spec(node.inputs[0]).dims != spec(node.outputs[0]).dims {
                bail!("input and output shapes differ");
            }
        }
        Op::Reshape => {
            arity(1..=1)?;
            if spec(node.inputs[0]).element_count() != spec(node.outputs[0]).element_count() {
                bail!("input and output element counts differ");
            }
        }
        Op::Add | Op::Mul => {
            arity(2..=2)?;
            let (a, b, o) = (
                spec(node.inputs[0]),
                spec(node.inputs[1]),
                spec(node.outputs[0]),
            );
            if !broadcast_ok(&a.dims, &b.dims, &o.dims) {
                bail!(
                    "shapes {:?} and {:?} do not broadcast to {:?}",
                    a.dims,
                    b.dims,
                    o.dims
                );
            }
        }
        Op::Softmax { beta } => {
            arity(1..=1)?;
            if spec(node.inputs[0]).dims != spec(node.outputs[0]).dims {
                bail!("input and output shapes differ");
            }
            if spec(node.inputs[0]).dims.is_empty() {
                bail!("softmax needs rank >= 1");
            }
            if !beta.is_finite() {
                bail!("beta must be finite");
            }
        }
        Op::FullyConnected => {
            arity(2..=3)?;
            let (x, w, y) = (
                spec(node.inputs[0]),
                spec(node.inputs[1]),
                spec(node.outputs[0]),
            );
            if w.dims.len() != 2 {
                bail!("weights must be [out, in], got {:?}", w.dims);
            }
            let (out, inn) = (w.dims[0], w.dims[1]);
            if x.dims.last() != Some(&inn) {
                bail!(
                    "input {:?} does not end in the weights' in-size {inn}",
                    x.dims
                );
            }
            let batch = x.element_count().unwrap_or(0) / inn as usize;
            if y.dims.len() != 2 || y.dims[0] as usize != batch || y.dims[1] != out {
                bail!("output must be [{batch}, {out}], got {:?}", y.dims);
            }
            if let Some(&b) = node.inputs.get(2)
                && spec(b).element_count() != Some(out as usize)
            {
                bail!("bias must have {out} elements, got {:?}", spec(b).dims);
            }
        }
    }
    Ok(())
}
