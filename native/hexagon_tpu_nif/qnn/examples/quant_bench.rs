//! Throughput of the host quantization kernels against a plain memcpy of the
//! same f32 buffer.
//!
//! `cargo run --release --example quant_bench -p qnn` prints this crate's kernels alone.
//! `bench/run.sh kernels` prints them next to ONNX Runtime's in one interleaved run: its
//! driver (`bench/kernels.py`) starts this program with `--serve` and sends one request a line,
//! `KERNEL H W C MIN_MS BATCHES`, answered with the best seconds per call of `BATCHES` batches of
//! at least `MIN_MS` ms each (or `error ...`). Kernels: see [`KERNELS`].
//!
//! Every kernel's GB/s counts the bytes of its f32 side only (its input for quantize and
//! f32->f16, its output for dequantize and f16->f32); memcpy's counts the f32 buffer it copies.

use std::hint::black_box;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use qnn::quant::{self, AxisLayout, PerAxis, PerTensor, QuantType};

#[path = "../src/model/quant/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

impl Rng {
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u32 << 24) as f32
    }
}

/// The kernels, by the name the driver uses, with a description.
const KERNELS: &[(&str, &str)] = &[
    ("memcpy", "memcpy f32"),
    ("q_u8", "quantize f32->u8"),
    ("q_i8", "quantize f32->s8"),
    ("q_u16", "quantize f32->u16"),
    ("q_i16", "quantize f32->s16"),
    ("qaxis_u8", "quantize f32->u8 per-axis (HWC, c=3)"),
    ("dq_u8", "dequantize u8->f32"),
    ("dq_i8", "dequantize s8->f32"),
    ("dq_u16", "dequantize u16->f32"),
    ("dq_i16", "dequantize s16->f32"),
    ("dqaxis_u8", "dequantize u8->f32 per-axis (HWC, c=3)"),
    ("f32_f16", "f32->f16"),
    ("f16_f32", "f16->f32"),
];

/// Seconds per call: calibrate the repetition count so a batch takes at
/// least `min_batch`, then report the best of `batches` batches.
fn time_per_call(min_batch: Duration, batches: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm up (page faults, caches)
    let mut reps = 1usize;
    loop {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        let e = t.elapsed();
        if e >= min_batch {
            break;
        }
        let grow = (min_batch.as_secs_f64() / e.as_secs_f64().max(1e-9) * 1.2).ceil();
        reps = (reps as f64 * grow.clamp(2.0, 100.0)) as usize;
    }
    let mut best = f64::INFINITY;
    for _ in 0..batches.max(1) {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

/// Per-tensor parameters of each container (the driver uses the same ones for ONNX Runtime).
fn params(ty: QuantType) -> (f32, i32) {
    match ty {
        QuantType::U8 => (2.0 / 255.0, -128),
        QuantType::I8 => (2.0 / 255.0, 0),
        QuantType::U16 => (2.0 / 65535.0, -32768),
        _ => (2.0 / 65535.0, 0),
    }
}

/// Per-channel parameters of the per-axis kernels (u8, three channels).
fn axis_params(c: usize) -> (Vec<f32>, Vec<i32>) {
    let scales = (0..c)
        .map(|i| 2.0 / 255.0 * (1.0 + i as f32 * 0.1))
        .collect();
    let offsets = (0..c).map(|i| -128 + i as i32).collect();
    (scales, offsets)
}

/// Seconds per call of `kernel` on an `h x w x c` tensor, `None` for an unknown kernel.
fn measure(
    kernel: &str,
    (h, w, c): (usize, usize, usize),
    min: Duration,
    batches: usize,
) -> Option<f64> {
    let n = h * w * c;
    let mut rng = Rng(0x5eed ^ n as u64);
    // Roughly normalized image data in [-1, 1).
    let xs: Vec<f32> = (0..n).map(|_| rng.unit() * 2.0 - 1.0).collect();
    let src: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut f32_dst = vec![0u8; n * 4];
    let time = |f: &mut dyn FnMut()| time_per_call(min, batches, f);
    let ty = |k: &str| match &k[k.len() - 2..] {
        "u8" => QuantType::U8,
        "i8" => QuantType::I8,
        "16" if k.ends_with("u16") => QuantType::U16,
        _ => QuantType::I16,
    };
    let layout = AxisLayout::from_dims(&[h, w, c], 2).unwrap();
    let (scales, offsets) = axis_params(c);
    let secs = match kernel {
        "memcpy" => time(&mut || {
            f32_dst.copy_from_slice(black_box(&src));
            black_box(&mut f32_dst);
        }),
        "q_u8" | "q_i8" | "q_u16" | "q_i16" => {
            let ty = ty(kernel);
            let (scale, offset) = params(ty);
            let p = PerTensor::new(ty, scale, offset, ty.full_range()).unwrap();
            let mut dst = vec![0u8; n * ty.size()];
            time(&mut || {
                p.quantize(black_box(&src), &mut dst).unwrap();
                black_box(&mut dst);
            })
        }
        "dq_u8" | "dq_i8" | "dq_u16" | "dq_i16" => {
            let ty = ty(kernel);
            let (scale, offset) = params(ty);
            let p = PerTensor::new(ty, scale, offset, ty.full_range()).unwrap();
            let mut q = vec![0u8; n * ty.size()];
            p.quantize(&src, &mut q).unwrap();
            time(&mut || {
                p.dequantize(black_box(&q), &mut f32_dst).unwrap();
                black_box(&mut f32_dst);
            })
        }
        "qaxis_u8" | "dqaxis_u8" => {
            let ty = QuantType::U8;
            let p =
                PerAxis::new(ty, layout, scales.into(), offsets.into(), ty.full_range()).unwrap();
            let mut q = vec![0u8; n];
            p.quantize(&src, &mut q).unwrap();
            if kernel == "qaxis_u8" {
                time(&mut || {
                    p.quantize(black_box(&src), &mut q).unwrap();
                    black_box(&mut q);
                })
            } else {
                time(&mut || {
                    p.dequantize(black_box(&q), &mut f32_dst).unwrap();
                    black_box(&mut f32_dst);
                })
            }
        }
        "f32_f16" | "f16_f32" => {
            let mut h16 = vec![0u8; n * 2];
            quant::f32_to_f16(&src, &mut h16).unwrap();
            if kernel == "f32_f16" {
                time(&mut || {
                    quant::f32_to_f16(black_box(&src), &mut h16).unwrap();
                    black_box(&mut h16);
                })
            } else {
                time(&mut || {
                    quant::f16_to_f32(black_box(&h16), &mut f32_dst).unwrap();
                    black_box(&mut f32_dst);
                })
            }
        }
        _ => return None,
    };
    Some(secs)
}

/// `--serve`: one request a line on stdin, one answer a line on stdout.
fn serve() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            [kernel, h, w, c, min_ms, batches] => {
                let nums = (
                    h.parse(),
                    w.parse(),
                    c.parse(),
                    min_ms.parse(),
                    batches.parse(),
                );
                match nums {
                    (Ok(h), Ok(w), Ok(c), Ok(min_ms), Ok(batches)) => {
                        let min = Duration::from_millis(min_ms);
                        match measure(kernel, (h, w, c), min, batches) {
                            Some(secs) => format!("{secs:e}"),
                            None => format!("error unknown kernel {kernel}"),
                        }
                    }
                    _ => "error bad numbers".to_string(),
                }
            }
            _ => "error expected: KERNEL H W C MIN_MS BATCHES".to_string(),
        };
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--serve") {
        return serve();
    }
    println!(
        "{:<40} {:>9} {:>11} {:>8} {:>9}",
        "kernel", "elements", "us/call", "GB/s", "x memcpy"
    );
    for (h, w, c) in [(224, 224, 3), (640, 640, 3)] {
        let n = h * w * c;
        println!("--- {h}x{w}x{c} f32 ---");
        let min = Duration::from_millis(50);
        let memcpy = measure("memcpy", (h, w, c), min, 5).unwrap();
        for (kernel, what) in KERNELS {
            let secs = measure(kernel, (h, w, c), min, 5).unwrap();
            println!(
                "{:<40} {:>9} {:>11.1} {:>8.2} {:>9.2}",
                what,
                n,
                secs * 1e6,
                (4 * n) as f64 / secs / 1e9,
                secs / memcpy
            );
        }
    }
}
