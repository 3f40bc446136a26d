//! A segmentation output to a class mask: each pixel's class is the argmax over its `C`
//! scores (the lowest class among equal maxima).

use super::defs::{Result, check_len, invalid};

/// Where the class axis of a `[H, W, C]` / `[C, H, W]` output is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskLayout {
    /// `[H, W, C]`: a pixel's scores are contiguous.
    Hwc,
    /// `[C, H, W]`: one plane per class.
    Chw,
}

/// The class of every pixel, row-major `[H, W]`: one byte each when `classes <= 256`, else
/// two (u16 little-endian). NaN is refused.
pub fn argmax_mask(
    output: &[f32],
    height: usize,
    width: usize,
    classes: usize,
    layout: MaskLayout,
) -> Result<Vec<u8>> {
    if classes == 0 || classes > 65_536 {
        return invalid("output", format!("{classes} classes: expected 1 to 65536"));
    }
    let pixels = height.saturating_mul(width);
    let shape = match layout {
        MaskLayout::Hwc => format!("[{height}, {width}, {classes}]"),
        MaskLayout::Chw => format!("[{classes}, {height}, {width}]"),
    };
    check_len("output", output, pixels.saturating_mul(classes), &shape)?;
    if let Some(p) = output.iter().position(|v| v.is_nan()) {
        return invalid("output", format!("value {p} is NaN"));
    }
    let mut class = vec![0u32; pixels];
    match layout {
        MaskLayout::Hwc => {
            for (px, scores) in class.iter_mut().zip(output.chunks_exact(classes)) {
                let mut best = scores[0];
                for (k, &v) in scores.iter().enumerate().skip(1) {
                    if v > best {
                        best = v;
                        *px = k as u32;
                    }
                }
            }
        }
        MaskLayout::Chw => {
            let mut best = output[..pixels].to_vec();
            for k in 1..classes {
                let plane = &output[k * pixels..(k + 1) * pixels];
                for ((b, px), &v) in best.iter_mut().zip(class.iter_mut()).zip(plane) {
                    if v > *b {
                        *b = v;
                        *px = k as u32;
                    }
                }
            }
        }
    }
    Ok(if classes <= 256 {
        class.into_iter().map(|c| c as u8).collect()
    } else {
        class
            .into_iter()
            .flat_map(|c| (c as u16).to_le_bytes())
            .collect()
    })
}
