//! Runs this crate's per-tensor quantize and dequantize kernels over a file of values, for a
//! peer comparison (`bench/quant_peers.py` runs onnxruntime and numpy on the same file).
//!
//! ```text
//! quant_compare quantize   IN.f32 OUT TYPE SCALE ZERO_POINT ITERATIONS
//! quant_compare dequantize IN     OUT TYPE SCALE ZERO_POINT ITERATIONS
//! ```
//! TYPE is u8, i8, u16 or i16; the zero point is the conventional one (QNN's offset is its
//! negation). Writes the result to OUT and prints the median µs per call.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use qnn::quant::{self, QuantType};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [op, input, output, ty, scale, zero_point, iterations] = args.as_slice() else {
        eprintln!(
            "usage: quant_compare quantize|dequantize IN OUT u8|i8|u16|i16 SCALE ZERO_POINT ITERATIONS"
        );
        return ExitCode::from(2);
    };
    let ty = match ty.as_str() {
        "u8" => QuantType::U8,
        "i8" => QuantType::I8,
        "u16" => QuantType::U16,
        "i16" => QuantType::I16,
        other => {
            eprintln!("unknown type {other}");
            return ExitCode::from(2);
        }
    };
    let (Ok(scale), Ok(zero_point), Ok(iterations)) = (
        scale.parse::<f32>(),
        zero_point.parse::<i32>(),
        iterations.parse::<usize>(),
    ) else {
        eprintln!("SCALE, ZERO_POINT and ITERATIONS must be numbers");
        return ExitCode::from(2);
    };
    let source = match std::fs::read(input) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("{input}: {e}");
            return ExitCode::from(1);
        }
    };
    let offset = -zero_point;
    let (count, quantize) = match op.as_str() {
        "quantize" => (source.len() / 4, true),
        "dequantize" => (source.len() / ty.size(), false),
        other => {
            eprintln!("unknown operation {other}");
            return ExitCode::from(2);
        }
    };
    let mut result = vec![
        0u8;
        if quantize {
            count * ty.size()
        } else {
            count * 4
        }
    ];
    let mut samples = Vec::with_capacity(iterations.max(1));
    for _ in 0..iterations.max(1) {
        let started = Instant::now();
        let outcome = if quantize {
            quant::quantize_per_tensor(&source, &mut result, ty, scale, offset, ty.full_range())
        } else {
            quant::dequantize_per_tensor(&source, &mut result, ty, scale, offset)
        };
        samples.push(started.elapsed());
        if let Err(e) = outcome {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
        black_box(&result);
    }
    samples.sort();
    let median: Duration = samples[samples.len() / 2];
    if let Err(e) = std::fs::write(output, &result) {
        eprintln!("{output}: {e}");
        return ExitCode::from(1);
    }
    println!("{:.2}", median.as_secs_f64() * 1e6);
    ExitCode::SUCCESS
}
