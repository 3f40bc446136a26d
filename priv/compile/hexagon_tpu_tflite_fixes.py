"""Two fixes to tflite2onnx 0.4.1 (the pinned converter) for what it raises an IndexError on in
MediaPipe 0.10.14's models, applied around its own functions before it converts (measured:
with them face_landmark, palm_detection_full/lite and pose_landmark_full convert, and answer as
tf2onnx's conversion of the same files does against the TFLite interpreter, to every digit
shown; the models it converted before come out identical):

1. A PRELU whose alpha is an fp16 constant behind a DEQUANTIZE (face_landmark, the palm
   detectors; tflite2onnx issue #72): its alpha is made 4-D for the layout pass, which walks on
   through the DEQUANTIZE to the constant, still [1, 1, C], and applies the 4-D permutation to
   its 3-element shape. Such a constant is given leading 1s first: broadcasting aligns from the
   right, so its values mean the same.
2. One PAD paddings constant shared by several PAD ops (pose_landmark_full: the TFLite
   converter merges equal constants): each PAD rewrites it in place ([n, 2] to [2n], ONNX's
   order), so the next one finds it 1-D. It is rewritten once; a PAD that shares it must have
   the same layout, or the conversion fails rather than pad wrongly.
3. DENSIFY (pose_detection, face_detection_full_range_sparse: fp16 weights stored sparse, one
   dimension in CSR), which tflite2onnx does not convert: a sparse constant is read dense, and
   the DENSIFY that reads it is dropped, its readers given the dense constant. Sparse formats
   with a block map or another traversal order are left refused.
4. DEPTH_TO_SPACE (the same two detectors' heads), which tflite2onnx does not convert: ONNX's
   DepthToSpace in DCR mode on the NCHW form is TFLite's on NHWC.
"""

FIXED_VERSION = "0.4.1"


def apply(version):
    """Wraps tflite2onnx's tensor and PAD transforms (once per process) when `version` is the
    one these fixes are for; another version is left as it is."""
    if version != FIXED_VERSION:
        return
    from tflite2onnx import tensor
    from tflite2onnx.op import padding

    if getattr(tensor.Tensor.transform, "hexagon_tpu_fix", False):
        return
    tensor.Tensor.transform = _alpha_fixed(tensor.Tensor.transform)
    padding.Padding.transform = _pads_once(padding.Padding.transform)
    _densify_supported()
    _depth_to_space_supported()


def _alpha_fixed(transform):
    def fixed(self):
        if _prelu_alpha_short(self):
            self.shape = [1] * (len(self.layout.source) - len(self.shape)) + list(self.shape)
        return transform(self)

    fixed.hexagon_tpu_fix = True
    return fixed


def _prelu_alpha_short(t):
    """A constant with fewer dimensions than its layout, read only by DEQUANTIZE ops whose
    outputs only PRELUs read (fix 1)."""
    if not t.isInitializer or t.layout is None or len(t.shape) >= len(t.layout.source) or not t.consumers:
        return False
    return all(
        dq.type == "DequantizeLinear" and all(out.consumers and all(c.type == "PRelu" for c in out.consumers) for out in dq.outputs)
        for dq in t.consumers
    )


def _pads_once(transform):
    def once(self):
        pads = self.inputs[1]
        layout = self.inputs[0].layout
        key = None if layout is None else (layout.source, layout.target)
        if hasattr(pads, "hexagon_tpu_layout"):
            if pads.hexagon_tpu_layout != key:
                raise ValueError(f"paddings '{pads.name}' are shared by PAD ops of different layouts ({pads.hexagon_tpu_layout} and {key})")
            return None
        result = transform(self)
        pads.hexagon_tpu_layout = key
        return result

    return once


def _densify_supported():
    """Fix 3: sparse constants read dense (TensorFactory.getData), DENSIFY registered as an op
    tflite2onnx parses, and dropped before its FP16 folding (which then folds the DEQUANTIZE
    after it, as for a dense fp16 weight)."""
    import tflite
    from tflite2onnx import graph, tensor
    from tflite2onnx.op.common import OpFactory, Operator

    read = tensor.TensorFactory.getData

    def dense_data(model, subgraph, index, dtype):
        sparsity = subgraph.Tensors(index).Sparsity()
        if sparsity is None:
            return read(model, subgraph, index, dtype)
        return _dense(model, subgraph.Tensors(index), sparsity, dtype)

    tensor.TensorFactory.getData = staticmethod(dense_data)

    class Densify(Operator):
        TypeMapping = {tflite.BuiltinOperator.DENSIFY: "Identity"}

        def __init__(self, factory, index):
            super().__init__(factory, index)
            self.setInited()

        @property
        def type(self):
            return "Identity"

        def parse(self):
            self.parseInput(0)
            self.parseOutput(0)
            self.setParsed()

        def propagatableTensors(self):
            return self.inputs + self.outputs

        def transform(self):
            pass

    OpFactory.register(Densify)
    fold = graph.foldFP16QuantPattern

    def dropped_then_folded(ops):
        for op in [op for op in ops if isinstance(op, Densify)]:
            dense, out = op.inputs[0], op.outputs[0]
            for reader in list(out.consumers):
                reader.replaceInput(out, dense)
                dense.addConsumer(reader)
            dense.removeConsumer(op)
            ops.remove(op)
        return fold(ops)

    graph.foldFP16QuantPattern = dropped_then_folded


# SparseIndexVector's union members, by type tag (the TFLite schema).
_INDEX_VECTORS = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}


def _dense(model, t, sparsity, dtype):
    """The dense values of a sparse constant: each dimension in traversal order is dense (a
    size) or CSR (segments into its indices), as TFLite's own format converter reads them; the
    leaf reached is the position in the stored values."""
    import numpy as np
    import tflite

    shape = [int(d) for d in t.ShapeAsNumpy()]
    order = [int(d) for d in sparsity.TraversalOrderAsNumpy()] if sparsity.TraversalOrderLength() else list(range(len(shape)))
    if order != list(range(len(shape))) or sparsity.BlockMapLength():
        raise ValueError(f"sparse tensor '{t.Name().decode()}': a block map or a traversal order other than the dimensions' is not read here")
    values = np.frombuffer(model.Buffers(t.Buffer()).DataAsNumpy(), dtype=dtype)
    dims = [sparsity.DimMetadata(d) for d in range(sparsity.DimMetadataLength())]
    dense = np.zeros(int(np.prod(shape)), dtype=dtype)
    strides = [int(np.prod(shape[d + 1 :])) for d in range(len(shape))]

    def vector(table, kind):
        holder = getattr(tflite, _INDEX_VECTORS[kind])()
        holder.Init(table.Bytes, table.Pos)
        return holder.ValuesAsNumpy()

    def walk(level, position, offset):
        if level == len(dims):
            dense[offset] = values[position]
            return
        meta = dims[level]
        if meta.Format() == tflite.DimensionType.DENSE:
            for i in range(meta.DenseSize()):
                walk(level + 1, position * meta.DenseSize() + i, offset + i * strides[level])
        else:
            segments = vector(meta.ArraySegments(), meta.ArraySegmentsType())
            indices = vector(meta.ArrayIndices(), meta.ArrayIndicesType())
            for j in range(int(segments[position]), int(segments[position + 1])):
                walk(level + 1, j, offset + int(indices[j]) * strides[level])

    walk(0, 0, 0)
    return dense.reshape(shape)


def _depth_to_space_supported():
    """Fix 4: DEPTH_TO_SPACE as ONNX's DepthToSpace (DCR), its tensors NHWC in TFLite and NCHW in
    ONNX, as tflite2onnx's Resize does its own."""
    import tflite
    from tflite2onnx.layout import Layout
    from tflite2onnx.op.common import OpFactory, Operator

    class DepthToSpace(Operator):
        TypeMapping = {tflite.BuiltinOperator.DEPTH_TO_SPACE: "DepthToSpace"}

        def __init__(self, factory, index):
            super().__init__(factory, index)
            self.attrs["mode"] = "DCR"
            self.setInited()

        @property
        def type(self):
            return "DepthToSpace"

        def parse(self):
            self.parseInput(0, Layout("NHWC", "NCHW"))
            self.parseOutput(0, Layout("NHWC", "NCHW"))
            options = tflite.DepthToSpaceOptions()
            table = self.tflite.BuiltinOptions()
            options.Init(table.Bytes, table.Pos)
            self.attrs["blocksize"] = options.BlockSize()
            self.setParsed()

        def propagatableTensors(self):
            return []

        def transform(self):
            pass

    OpFactory.register(DepthToSpace)
