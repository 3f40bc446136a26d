//! Quantization parameters checked once, when a tensor's metadata is read ([`PerTensor`],
//! [`PerAxis`]); each conversion with them then checks only lengths.

use super::*;

/// Per-tensor parameters whose scale and range were checked when they were made: a tensor's
/// conversion is built once, when its metadata is read, and each call checks only lengths.
#[derive(Clone, Debug, PartialEq)]
pub struct PerTensor {
    ty: QuantType,
    scale: f32,
    offset: i32,
    range: (i64, i64),
}

impl PerTensor {
    /// Checks the scale and that `range` fits the container.
    pub fn new(
        ty: QuantType,
        scale: f32,
        offset: i32,
        range: (i64, i64),
    ) -> Result<Self, QuantError> {
        check_scale(scale, None)?;
        check_range(ty, range)?;
        Ok(PerTensor {
            ty,
            scale,
            offset,
            range,
        })
    }

    /// [`quantize_per_tensor`] with these parameters.
    pub fn quantize(&self, src_f32: &[u8], dst: &mut [u8]) -> Result<(), QuantError> {
        pair(src_f32, 4, dst, self.ty.size(), "src_f32", "dst")?;
        let src = src_f32.as_chunks::<4>().0;
        if quantize_fast(src, dst, self.ty, self.scale, self.offset, self.range) {
            return Ok(());
        }
        if use_f32_path(self.ty, &[self.offset]) {
            qrun_best(
                src,
                dst,
                self.ty.size(),
                QParams::<f32>::new(self.scale, self.offset, self.range),
            );
        } else {
            qrun_best(
                src,
                dst,
                self.ty.size(),
                QParams::<f64>::new(self.scale, self.offset, self.range),
            );
        }
        Ok(())
    }

    /// [`dequantize_per_tensor`] with these parameters (the range plays no part).
    pub fn dequantize(&self, src: &[u8], dst_f32: &mut [u8]) -> Result<(), QuantError> {
        pair(src, self.ty.size(), dst_f32, 4, "src", "dst_f32")?;
        let dst = dst_f32.as_chunks_mut::<4>().0;
        dq_run_best(self.ty, src, dst, self.scale, self.offset);
        Ok(())
    }
}

/// Per-axis parameters checked when they were made (scales, their count, the range); each
/// call checks only lengths. They borrow or own their scales and offsets.
#[derive(Clone, Debug, PartialEq)]
pub struct PerAxis<'p> {
    ty: QuantType,
    layout: AxisLayout,
    scales: Cow<'p, [f32]>,
    offsets: Cow<'p, [i32]>,
    range: (i64, i64),
}

impl<'p> PerAxis<'p> {
    /// Checks the scales, that there is one scale and offset per index along the axis, and
    /// that `range` fits the container.
    pub fn new(
        ty: QuantType,
        layout: AxisLayout,
        scales: Cow<'p, [f32]>,
        offsets: Cow<'p, [i32]>,
        range: (i64, i64),
    ) -> Result<Self, QuantError> {
        check_params(layout, &scales, &offsets)?;
        check_range(ty, range)?;
        Ok(PerAxis {
            ty,
            layout,
            scales,
            offsets,
            range,
        })
    }

    /// [`quantize_per_axis`] with these parameters.
    pub fn quantize(&self, src_f32: &[u8], dst: &mut [u8]) -> Result<(), QuantError> {
        let n = pair(src_f32, 4, dst, self.ty.size(), "src_f32", "dst")?;
        check_layout(self.layout, n)?;
        let (ty, layout, range) = (self.ty, self.layout, self.range);
        let (scales, offsets) = (&*self.scales, &*self.offsets);
        if layout.is_empty() {
            return Ok(());
        }
        let src = src_f32.as_chunks::<4>().0;
        if use_f32_path(ty, offsets) {
            quantize_axis_with::<f32>(src, dst, ty, layout, scales, offsets, range);
        } else {
            quantize_axis_with::<f64>(src, dst, ty, layout, scales, offsets, range);
        }
        Ok(())
    }

    /// [`dequantize_per_axis`] with these parameters.
    pub fn dequantize(&self, src: &[u8], dst_f32: &mut [u8]) -> Result<(), QuantError> {
        let n = pair(src, self.ty.size(), dst_f32, 4, "src", "dst_f32")?;
        check_layout(self.layout, n)?;
        let (ty, layout) = (self.ty, self.layout);
        let (scales, offsets) = (&*self.scales, &*self.offsets);
        if layout.is_empty() {
            return Ok(());
        }
        let size = ty.size();
        let inner = layout.inner;
        let dst = dst_f32.as_chunks_mut::<4>().0;
        if inner >= SHORT_INNER {
            let runs = src
                .chunks_exact(inner * size)
                .zip(dst.chunks_exact_mut(inner));
            let params = scales.iter().zip(offsets).cycle();
            for ((s, d), (&scale, &offset)) in runs.zip(params) {
                dq_run_best(ty, s, d, scale, offset);
            }
        } else {
            let chans = row_channels(layout);
            let sc: Vec<f32> = chans.iter().map(|&c| scales[c]).collect();
            if use_i32_path(ty, offsets) {
                let of: Vec<i32> = chans.iter().map(|&c| offsets[c]).collect();
                dispatch_load!(ty, i32, drows, src, dst, &sc, &of);
            } else {
                let of: Vec<i64> = chans.iter().map(|&c| offsets[c] as i64).collect();
                dispatch_load!(ty, i64, drows, src, dst, &sc, &of);
            }
        }
        Ok(())
    }
}
