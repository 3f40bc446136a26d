//! Throughput of the host quantization kernels against a plain memcpy of the
//! same f32 buffer.
//!
//! `cargo run --release --example quant_bench -p qnn`

use std::hint::black_box;
use std::time::{Duration, Instant};

use qnn::quant::{self, AxisLayout, QuantType};

/// Minimum wall time of one measurement batch.
const MIN_BATCH: Duration = Duration::from_millis(50);
/// Batches per kernel; the best (fastest) one is reported.
const BATCHES: usize = 5;

#[path = "../src/quant/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

impl Rng {
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u32 << 24) as f32
    }
}

/// Seconds per call: calibrate the repetition count so a batch takes at
/// least `MIN_BATCH`, then report the best of `BATCHES` batches.
fn time_per_call(mut f: impl FnMut()) -> f64 {
    f(); // warm up (page faults, caches)
    let mut reps = 1usize;
    loop {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        let e = t.elapsed();
        if e >= MIN_BATCH {
            break;
        }
        let grow = (MIN_BATCH.as_secs_f64() / e.as_secs_f64().max(1e-9) * 1.2).ceil();
        reps = (reps as f64 * grow.clamp(2.0, 100.0)) as usize;
    }
    let mut best = f64::INFINITY;
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

struct Row {
    kernel: &'static str,
    elems: usize,
    secs: f64,
    bytes: usize,
}

fn bench_size(h: usize, w: usize, c: usize) -> Vec<Row> {
    let n = h * w * c;
    let mut rng = Rng(0x5eed ^ n as u64);
    // Roughly normalized image data in [-1, 1).
    let xs: Vec<f32> = (0..n).map(|_| rng.unit() * 2.0 - 1.0).collect();
    let src: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut f32_dst = vec![0u8; n * 4];
    let mut u8_buf = vec![0u8; n];
    let mut u16_buf = vec![0u8; n * 2];
    let mut f16_buf = vec![0u8; n * 2];
    let (scale, offset) = (2.0f32 / 255.0, -128);
    let u8r = QuantType::U8.full_range();
    let u16r = QuantType::U16.full_range();
    quant::quantize_per_tensor(&src, &mut u8_buf, QuantType::U8, scale, offset, u8r).unwrap();
    quant::f32_to_f16(&src, &mut f16_buf).unwrap();
    let layout = AxisLayout::from_dims(&[h, w, c], 2).unwrap();
    let scales: Vec<f32> = (0..c).map(|i| scale * (1.0 + i as f32 * 0.1)).collect();
    let offsets: Vec<i32> = (0..c).map(|i| -128 + i as i32).collect();

    let mut rows = Vec::new();
    let mut push = |kernel, secs, bytes| {
        rows.push(Row {
            kernel,
            elems: n,
            secs,
            bytes,
        })
    };

    let t = time_per_call(|| {
        f32_dst.copy_from_slice(black_box(&src));
        black_box(&mut f32_dst);
    });
    push("memcpy f32", t, 8 * n);

    let t = time_per_call(|| {
        quant::quantize_per_tensor(
            black_box(&src),
            &mut u8_buf,
            QuantType::U8,
            scale,
            offset,
            u8r,
        )
        .unwrap();
        black_box(&mut u8_buf);
    });
    push("quantize f32->u8", t, 5 * n);

    let t = time_per_call(|| {
        quant::quantize_per_tensor(
            black_box(&src),
            &mut u16_buf,
            QuantType::U16,
            scale / 256.0,
            -32768,
            u16r,
        )
        .unwrap();
        black_box(&mut u16_buf);
    });
    push("quantize f32->u16", t, 6 * n);

    let t = time_per_call(|| {
        quant::dequantize_per_tensor(
            black_box(&u8_buf),
            &mut f32_dst,
            QuantType::U8,
            scale,
            offset,
        )
        .unwrap();
        black_box(&mut f32_dst);
    });
    push("dequantize u8->f32", t, 5 * n);

    let t = time_per_call(|| {
        quant::quantize_per_axis(
            black_box(&src),
            &mut u8_buf,
            QuantType::U8,
            layout,
            &scales,
            &offsets,
            u8r,
        )
        .unwrap();
        black_box(&mut u8_buf);
    });
    push("per-axis f32->u8 (HWC, c=3)", t, 5 * n);

    let t = time_per_call(|| {
        quant::f32_to_f16(black_box(&src), &mut f16_buf).unwrap();
        black_box(&mut f16_buf);
    });
    push("f32->f16", t, 6 * n);

    let t = time_per_call(|| {
        quant::f16_to_f32(black_box(&f16_buf), &mut f32_dst).unwrap();
        black_box(&mut f32_dst);
    });
    push("f16->f32", t, 6 * n);

    rows
}

fn main() {
    println!(
        "{:<30} {:>9} {:>11} {:>8} {:>9}",
        "kernel", "elements", "us/call", "GB/s", "x memcpy"
    );
    for (h, w, c) in [(224, 224, 3), (640, 640, 3)] {
        println!("--- {h}x{w}x{c} f32 ---");
        let rows = bench_size(h, w, c);
        let memcpy = rows[0].secs;
        for r in &rows {
            println!(
                "{:<30} {:>9} {:>11.1} {:>8.2} {:>9.2}",
                r.kernel,
                r.elems,
                r.secs * 1e6,
                r.bytes as f64 / r.secs / 1e9,
                r.secs / memcpy
            );
        }
    }
}
