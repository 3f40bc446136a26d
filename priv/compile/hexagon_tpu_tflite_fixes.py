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
