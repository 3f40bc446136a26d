//! The sweep over the output: nearest and bilinear (fixed point) resizing of the crop
//! into the content rectangle, reading frame rows through [`Rows`] (in place for RGB,
//! converted column by column for YUV), and the letterbox padding around it.

use super::linear::{self, HTaps, Kernels};
use super::yuv::{Planes, RowLayout, Sparse};
use super::{Layout, Plan, Rect};

/// Frame rows as RGB: the frame itself from the crop's first pixel on (packed RGB, 3 bytes a
/// pixel), or the needed columns of the row converted into a buffer (YUV, or RGB in planes),
/// laid out as `layout` says: packed, `px` bytes a pixel (3, or 4 with a zero fourth byte,
/// which the conversion writes as one u32), or in three planes (the vector kernels').
struct Rows<'a> {
    src: &'a [u8],
    planes: &'a Planes,
    crop: Rect,
    /// The crop columns converted, in this order (unless the frame is read in place).
    cols: Vec<usize>,
    layout: RowLayout,
    buf: Vec<u8>,
    /// YUV: the Y, U, V samples of a row's columns, before their conversion.
    samples: [Vec<u8>; 3],
    /// Columns far apart, which the kernels gather from the frame themselves.
    sparse: Option<Sparse>,
    kernels: Kernels,
}

impl<'a> Rows<'a> {
    fn new(
        src: &'a [u8],
        planes: &'a Planes,
        crop: Rect,
        (cols, layout): (Vec<usize>, RowLayout),
        kernels: Kernels,
    ) -> Rows<'a> {
        let len = match layout {
            RowLayout::Packed(_) if planes.direct() => 0,
            RowLayout::Packed(px) => cols.len() * px,
            RowLayout::Planar(stride) => 3 * stride,
        };
        let contiguous = cols.windows(2).all(|w| w[1] == w[0] + 1);
        let sparse = match layout {
            RowLayout::Planar(_) if !contiguous => planes.sparse(kernels, crop.x, &cols),
            _ => None,
        };
        Rows {
            src,
            planes,
            crop,
            cols,
            layout,
            buf: vec![0; len],
            samples: Default::default(),
            sparse,
            kernels,
        }
    }

    /// Crop row `y` (RGB: up to the end of the frame, the bytes after the row included).
    fn row(&mut self, y: usize) -> &[u8] {
        let (crop, src) = (self.crop, self.src);
        if self.planes.direct() && matches!(self.layout, RowLayout::Packed(_)) {
            return &src[(crop.y + y) * self.planes.stride + crop.x * 3..];
        }
        if let (Some(sparse), RowLayout::Planar(stride)) = (&self.sparse, self.layout) {
            let out = (&mut self.buf[..], stride);
            self.planes.gather_sparse(src, crop.y + y, sparse, out);
            return &self.buf;
        }
        self.planes.gather(
            src,
            crop.y + y,
            crop.x,
            &self.cols,
            &mut self.samples,
            (&mut self.buf, self.layout),
            self.kernels,
        );
        &self.buf
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
        let cols = if direct { vec![] } else { xs };
        let layout = RowLayout::Packed(3);
        let mut rows = Rows::new(src, &self.planes, crop, (cols, layout), Kernels::best());
        let chans = [0, 1, 2].map(|c| self.source_channel(c));
        let dst = dst.as_chunks_mut::<N>().0;
        for dy in 0..r.height {
            let sy = nearest_index(dy, crop.height, r.height);
            let row = rows.row(sy);
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

    /// Bilinear in OpenCV's fixed point ([`super::linear`]): each needed source row is
    /// converted (YUV; and RGB when the kernels read planes) and resampled horizontally once,
    /// into a ring of two rows; each output row blends two of them into u8 pixels, which the
    /// tables turn into output bytes.
    pub(super) fn bilinear<const N: usize>(
        &self,
        luts: &[Vec<u8>; 3],
        src: &[u8],
        dst: &mut [u8],
        kernels: Kernels,
    ) {
        let s = &self.spec;
        let (crop, r) = (self.crop, self.content);
        // a column of weight 0 adds nothing: the other column is read in its place (a
        // downscale by an odd integer reads one column per output column)
        let xs: Vec<(usize, usize, [i16; 2])> = (0..r.width)
            .map(|d| match linear::column(d, crop.width, r.width) {
                (i0, _, a @ [_, 0]) => (i0, i0, a),
                (_, i1, a @ [0, _]) => (i1, i1, a),
                tap => tap,
            })
            .collect();
        let planar = kernels.planar();
        let direct = self.planes.direct() && !planar;
        // YUV: only the columns the taps read are converted, each once, in increasing order
        let (cols, slot) = if direct {
            (vec![], vec![])
        } else {
            let mut slot = vec![u32::MAX; crop.width];
            for &(i0, i1, _) in &xs {
                slot[i0] = 0;
                slot[i1] = 0;
            }
            let mut cols = Vec::new();
            for (i, p) in slot.iter_mut().enumerate() {
                if *p == 0 {
                    *p = cols.len() as u32;
                    cols.push(i);
                }
            }
            // a quarter of a range or more used: converting all of it, as slices, is cheaper
            // than one column at a time; but kernels that gather sparse columns themselves
            // (AVX2's) take them from a half down
            let (first, last) = (cols[0], cols[cols.len() - 1]);
            let sparse = planar && self.planes.sparse(kernels, 0, &[]).is_some();
            if last - first < if sparse { 2 } else { 4 } * cols.len() {
                cols = (first..=last).collect();
                for (i, p) in slot.iter_mut().enumerate().skip(first) {
                    *p = (i - first) as u32;
                }
            }
            (cols, slot)
        };
        // packed YUV rows are converted to 4 bytes a pixel (one u32 store each); planes are 64
        // bytes longer than the row (the vector passes read up to 64 bytes from a block's first)
        let (layout, px, channel) = if planar {
            let stride = cols.len() + 64;
            (RowLayout::Planar(stride), 1, stride)
        } else if direct {
            (RowLayout::Packed(3), 3, 1)
        } else {
            (RowLayout::Packed(4), 4, 1)
        };
        let offset = |i: usize| px * if direct { i } else { slot[i] as usize };
        let mut taps = HTaps::new(channel);
        for &(i0, i1, a) in &xs {
            taps.push(offset(i0), offset(i1), a);
        }
        let mut rows = Rows::new(src, &self.planes, crop, (cols, layout), kernels);
        let tables: [&[[u8; N]]; 3] = [0, 1, 2].map(|c| luts[c].as_chunks::<N>().0);
        // u8 outputs: the tables as 256 bytes, for the kernels' lookup
        let bytes: Option<[&[u8; 256]; 3]> = (N == 1)
            .then(|| [0, 1, 2].map(|c| luts[c].as_slice().try_into().ok()))
            .and_then(|[a, b, c]| Some([a?, b?, c?]));
        let chans = [0, 1, 2].map(|c| self.source_channel(c));
        // u8 tables that map every value to itself (a 0..1 input quantized with scale 1/255):
        // the blended values are the output bytes, no lookup
        let identity =
            bytes.map(|t| t.map(|t| t.iter().enumerate().all(|(i, &v)| v as usize == i)));
        let w = r.width;
        // the ring: two source rows resampled horizontally (a plane per channel), tagged with
        // their crop row
        let mut ring = [vec![0i16; w * 3], vec![0i16; w * 3]];
        let mut tags = [usize::MAX; 2];
        let mut pixels = vec![0u8; w * 3];
        let mut looked = if bytes.is_some() && s.layout == Layout::Nhwc {
            vec![0u8; w * 3]
        } else {
            vec![]
        };
        for dy in 0..r.height {
            let (r0, r1, b) = linear::row(dy, crop.height, r.height);
            // a row of weight 0 adds nothing: the other row is read in its place (integer
            // ratios read one row per output row)
            let (r0, r1) = match b {
                [_, 0] => (r0, r0),
                [0, _] => (r1, r1),
                _ => (r0, r1),
            };
            // rows only move down: r0 is in the ring or is the next one to resample
            for y in [r0, r1] {
                if !tags.contains(&y) {
                    // replace the row that is not r0
                    let k = if tags[0] == r0 { 1 } else { 0 };
                    kernels.horizontal(rows.row(y), &taps, &mut ring[k]);
                    tags[k] = y;
                }
            }
            let k0 = if tags[0] == r0 { 0 } else { 1 };
            let k1 = if tags[0] == r1 { 0 } else { 1 };
            let (h0, h1) = (&ring[k0], &ring[k1]);
            let y = r.y + dy;
            // source channel `c`'s blended values into `out`
            let blend = |c: usize, out: &mut [u8]| {
                let at = c * w..(c + 1) * w;
                kernels.vertical(&h0[at.clone()], &h1[at], b, out);
            };
            match (s.layout, bytes, identity) {
                (Layout::Nhwc, Some(bytes), Some(identity)) => {
                    blend(0, &mut pixels[..w]);
                    blend(1, &mut pixels[w..2 * w]);
                    blend(2, &mut pixels[2 * w..]);
                    for c in (0..3).filter(|&c| !identity[c]) {
                        let plane = &pixels[chans[c] * w..(chans[c] + 1) * w];
                        kernels.lookup(bytes[c], plane, &mut looked[c * w..(c + 1) * w]);
                    }
                    let planes: [&[u8]; 3] = std::array::from_fn(|c| {
                        let (from, k) = if identity[c] {
                            (&pixels, chans[c])
                        } else {
                            (&looked, c)
                        };
                        &from[k * w..(k + 1) * w]
                    });
                    let start = (y * s.dst_width + r.x) * 3;
                    kernels.interleave(planes, &mut dst[start..start + w * 3]);
                }
                (Layout::Nchw, Some(bytes), Some(identity)) => {
                    for (c, table) in bytes.into_iter().enumerate() {
                        let start = (c * s.dst_height + y) * s.dst_width + r.x;
                        let out = &mut dst[start..start + w];
                        if identity[c] {
                            blend(chans[c], out);
                        } else {
                            let plane = &mut pixels[..w];
                            blend(chans[c], plane);
                            kernels.lookup(table, plane, out);
                        }
                    }
                }
                (Layout::Nhwc, _, _) => {
                    blend(0, &mut pixels[..w]);
                    blend(1, &mut pixels[w..2 * w]);
                    blend(2, &mut pixels[2 * w..]);
                    let plane = |c: usize| &pixels[chans[c] * w..(chans[c] + 1) * w];
                    let dst = dst.as_chunks_mut::<N>().0;
                    let start = (y * s.dst_width + r.x) * 3;
                    let out = &mut dst[start..start + w * 3];
                    let (p0, p1, p2) = (plane(0), plane(1), plane(2));
                    for (j, o) in out.chunks_exact_mut(3).enumerate() {
                        o[0] = tables[0][p0[j] as usize];
                        o[1] = tables[1][p1[j] as usize];
                        o[2] = tables[2][p2[j] as usize];
                    }
                }
                (Layout::Nchw, _, _) => {
                    let dst = dst.as_chunks_mut::<N>().0;
                    for (c, table) in tables.iter().enumerate() {
                        let plane = &mut pixels[..w];
                        blend(chans[c], plane);
                        let start = (c * s.dst_height + y) * s.dst_width + r.x;
                        let out = &mut dst[start..start + w];
                        for (o, &p) in out.iter_mut().zip(plane.iter()) {
                            *o = table[p as usize];
                        }
                    }
                }
            }
        }
    }
}

/// Nearest source index of destination index `d`: `floor((d + 0.5) * src / dst)`, exactly.
pub(super) fn nearest_index(d: usize, src: usize, dst: usize) -> usize {
    let i = ((2 * d as u128 + 1) * src as u128) / (2 * dst as u128);
    (i as usize).min(src - 1)
}
