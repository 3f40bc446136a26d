//! The sweep over the output: nearest (table look-ups) and bilinear (f32) resizing of the crop
//! into the content rectangle, reading frame rows through [`Rows`] (in place for RGB,
//! converted column by column for YUV), and the letterbox padding around it.

use super::yuv::Planes;
use super::{Layout, Plan, PreprocessError, Rect};

/// Frame rows as packed RGB: a slice of the frame itself (RGB), or the needed columns of the
/// row converted into one of two buffers (YUV; the last two rows are kept, for bilinear).
struct Rows<'a> {
    src: &'a [u8],
    planes: &'a Planes,
    crop: Rect,
    /// YUV: the crop columns converted, in this order.
    cols: Vec<usize>,
    bufs: [Vec<u8>; 2],
    /// YUV: the Y, U, V samples of a row's columns, before their conversion.
    samples: [Vec<u8>; 3],
    tags: [usize; 2],
    next: usize,
}

impl<'a> Rows<'a> {
    fn new(src: &'a [u8], planes: &'a Planes, crop: Rect, cols: Vec<usize>) -> Rows<'a> {
        let len = if planes.direct() { 0 } else { cols.len() * 3 };
        Rows {
            src,
            planes,
            crop,
            cols,
            bufs: [vec![0; len], vec![0; len]],
            samples: Default::default(),
            tags: [usize::MAX; 2],
            next: 0,
        }
    }

    /// Crop rows `y0` and `y1`.
    fn pair(&mut self, y0: usize, y1: usize) -> (&[u8], &[u8]) {
        if self.planes.direct() {
            let (crop, stride, src) = (self.crop, self.planes.stride, self.src);
            let row = |y: usize| {
                let at = (crop.y + y) * stride + crop.x * 3;
                &src[at..at + crop.width * 3]
            };
            return (row(y0), row(y1));
        }
        let s0 = self.load(y0, usize::MAX);
        let s1 = self.load(y1, s0);
        (&self.bufs[s0], &self.bufs[s1])
    }

    fn load(&mut self, y: usize, keep: usize) -> usize {
        if let Some(s) = (0..2).find(|&s| self.tags[s] == y) {
            return s;
        }
        let s = match keep {
            0 => 1,
            1 => 0,
            _ => self.next,
        };
        self.next = 1 - s;
        let (x0, row) = (self.crop.x, self.crop.y + y);
        self.planes.gather(
            self.src,
            row,
            x0,
            &self.cols,
            &mut self.samples,
            &mut self.bufs[s],
        );
        self.tags[s] = y;
        s
    }
}

impl Plan {
    /// The pad value's bytes around the content rectangle (letterbox): rows of padding made
    /// once, then copied.
    pub(super) fn pad(&self, dst: &mut [u8]) {
        let (w, h, e) = (self.spec.dst_width, self.spec.dst_height, self.elem);
        let r = self.content;
        // NHWC: one row of pixels; NCHW: one row per channel
        let (rows, len): (Vec<Vec<u8>>, usize) = match self.spec.layout {
            Layout::Nhwc => {
                let px: Vec<u8> = self.pad_bytes.concat();
                (vec![px.repeat(w)], 3 * e)
            }
            Layout::Nchw => (self.pad_bytes.iter().map(|b| b.repeat(w)).collect(), e),
        };
        for (c, row) in rows.iter().enumerate() {
            for y in 0..h {
                let start = (c * h + y) * w * len;
                let out = &mut dst[start..start + w * len];
                if (r.y..r.y + r.height).contains(&y) {
                    out[..r.x * len].copy_from_slice(&row[..r.x * len]);
                    let right = (r.x + r.width) * len;
                    out[right..].copy_from_slice(&row[right..]);
                } else {
                    out.copy_from_slice(row);
                }
            }
        }
    }

    pub(super) fn nearest<const N: usize>(&self, luts: &[Vec<u8>; 3], src: &[u8], dst: &mut [u8]) {
        let s = &self.spec;
        let (crop, r) = (self.crop, self.content);
        let tables: [&[[u8; N]]; 3] = [0, 1, 2].map(|c| luts[c].as_chunks::<N>().0);
        let xs: Vec<usize> = (0..r.width)
            .map(|d| nearest_index(d, crop.width, r.width))
            .collect();
        let direct = self.planes.direct();
        let at: Vec<usize> = if direct {
            xs.iter().map(|x| x * 3).collect()
        } else {
            (0..r.width).map(|j| j * 3).collect()
        };
        let mut rows = Rows::new(src, &self.planes, crop, if direct { vec![] } else { xs });
        let chans = [0, 1, 2].map(|c| self.source_channel(c));
        let dst = dst.as_chunks_mut::<N>().0;
        for dy in 0..r.height {
            let sy = nearest_index(dy, crop.height, r.height);
            let (row, _) = rows.pair(sy, sy);
            let y = r.y + dy;
            match s.layout {
                Layout::Nhwc => {
                    let start = (y * s.dst_width + r.x) * 3;
                    let out = &mut dst[start..start + r.width * 3];
                    for (px, &x) in out.chunks_exact_mut(3).zip(&at) {
                        let p = &row[x..x + 3];
                        px[0] = tables[0][p[chans[0]] as usize];
                        px[1] = tables[1][p[chans[1]] as usize];
                        px[2] = tables[2][p[chans[2]] as usize];
                    }
                }
                Layout::Nchw => {
                    for c in 0..3 {
                        let start = (c * s.dst_height + y) * s.dst_width + r.x;
                        let out = &mut dst[start..start + r.width];
                        let (table, sc) = (tables[c], chans[c]);
                        for (o, &x) in out.iter_mut().zip(&at) {
                            *o = table[row[x + sc] as usize];
                        }
                    }
                }
            }
        }
    }

    pub(super) fn bilinear(&self, src: &[u8], dst: &mut [u8]) -> Result<(), PreprocessError> {
        let s = &self.spec;
        let (crop, r) = (self.crop, self.content);
        let xs = taps(crop.width, r.width);
        let direct = self.planes.direct();
        // per output column, where its two neighbours are in a row from `rows`
        let at: Vec<(usize, usize)> = if direct {
            xs.iter().map(|t| (t.i0 * 3, t.i1 * 3)).collect()
        } else {
            (0..r.width).map(|j| (j * 6, j * 6 + 3)).collect()
        };
        let cols = if direct {
            vec![]
        } else {
            xs.iter().flat_map(|t| [t.i0, t.i1]).collect()
        };
        let mut rows = Rows::new(src, &self.planes, crop, cols);
        let chans = [0, 1, 2].map(|c| self.source_channel(c));
        let (w, e) = (r.width, self.elem);
        // One output row of normalized f32 values, in the output's order (NHWC: pixel by
        // pixel; NCHW: channel by channel), then converted into `dst` in one call.
        let mut row = vec![[0u8; 4]; w * 3];
        for dy in 0..r.height {
            let ty = tap(dy, crop.height, r.height);
            let (r0, r1) = rows.pair(ty.i0, ty.i1);
            for (dx, (tx, &(a, b))) in xs.iter().zip(&at).enumerate() {
                for (c, &sc) in chans.iter().enumerate() {
                    let top = r0[a + sc] as f32 * tx.w0 + r0[b + sc] as f32 * tx.w1;
                    let bottom = r1[a + sc] as f32 * tx.w0 + r1[b + sc] as f32 * tx.w1;
                    let v = top * ty.w0 + bottom * ty.w1;
                    let i = match s.layout {
                        Layout::Nhwc => dx * 3 + c,
                        Layout::Nchw => c * w + dx,
                    };
                    row[i] = self.normalize(v, c).to_le_bytes();
                }
            }
            let y = r.y + dy;
            match s.layout {
                Layout::Nhwc => {
                    let start = (y * s.dst_width + r.x) * 3 * e;
                    self.conv.emit(&row, &mut dst[start..start + w * 3 * e])?;
                }
                Layout::Nchw => {
                    for c in 0..3 {
                        let start = ((c * s.dst_height + y) * s.dst_width + r.x) * e;
                        self.conv
                            .emit(&row[c * w..(c + 1) * w], &mut dst[start..start + w * e])?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Nearest source index of destination index `d`: `floor((d + 0.5) * src / dst)`, exactly.
pub(super) fn nearest_index(d: usize, src: usize, dst: usize) -> usize {
    let i = ((2 * d as u128 + 1) * src as u128) / (2 * dst as u128);
    (i as usize).min(src - 1)
}

/// The two source indices and weights of one destination index (bilinear).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Tap {
    pub i0: usize,
    pub i1: usize,
    pub w0: f32,
    pub w1: f32,
}

pub(super) fn tap(d: usize, src: usize, dst: usize) -> Tap {
    let ratio = src as f64 / dst as f64;
    let t = ((d as f64 + 0.5) * ratio - 0.5).max(0.0);
    let i0 = (t.floor() as usize).min(src - 1);
    let i1 = (i0 + 1).min(src - 1);
    let w1 = (t - i0 as f64) as f32;
    Tap {
        i0,
        i1,
        w0: 1.0 - w1,
        w1,
    }
}

fn taps(src: usize, dst: usize) -> Vec<Tap> {
    (0..dst).map(|d| tap(d, src, dst)).collect()
}
