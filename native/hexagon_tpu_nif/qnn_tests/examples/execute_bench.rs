//! How much time the runtime adds around `graphExecute`, on qnn_sim.
//!
//! For an identity graph over 224x224x3 and 640x640x3 u8 tensors, prints per call:
//! the wall time of `Graph::execute`, the pure `graphExecute` time the runtime measured, and
//! their difference (validation, tensor descriptions, locks, counters), plus the f32 path
//! (quantize in, dequantize out) and a memcpy of the same bytes as the physical reference. The
//! qnn_sim identity copies input to output, so its own time is about one memcpy.
//!
//! Run: `cargo run --release -p qnn_tests --example execute_bench` (builds `libqnn_sim.so` first:
//! `cargo build --release -p qnn_sim`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use qnn::Site;
use qnn::{Context, Graph, io};
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::{DType, Quant, TensorSpec};

mod common;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = common::sim_runtime();
    println!(
        "{:<12} {:>10} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "shape", "bytes", "execute µs", "graphExec µs", "overhead µs", "f32 path µs", "memcpy µs"
    );
    for (label, dims) in [
        ("224x224x3", [1u32, 224, 224, 3]),
        ("640x640x3", [1, 640, 640, 3]),
    ] {
        let spec = TensorSpec::new(DType::UFixed8, dims).quant(Quant::per_tensor(1.0 / 255.0, 0));
        let model = ModelBuilder::new()
            .graph("identity", |g| {
                let x = g.input("x", spec.clone());
                let y = g.identity("y", x, spec.clone());
                g.output(y);
            })
            .build()
            .expect("model");
        let context = Context::from_bytes(&runtime, &model, &Site::here()).expect("context");
        let graph = Graph::retrieve(&context, "identity", &Site::here()).expect("graph");
        let info = graph.info().clone();
        let bytes = info.inputs[0].byte_size;
        let input = vec![7u8; bytes];
        let mut output = vec![0u8; bytes];
        let features: Vec<u8> = (0..bytes)
            .flat_map(|i| ((i % 255) as f32 / 255.0).to_le_bytes())
            .collect();
        let mut scratch = vec![0u8; bytes];
        let mut result = vec![0u8; bytes * 4];

        let iterations = if bytes > 1_000_000 { 50 } else { 300 };
        let (mut wall, mut pure, mut f32_path, mut copy) = (vec![], vec![], vec![], vec![]);
        for _ in 0..iterations {
            let started = Instant::now();
            let report = graph
                .execute(&[&input], &mut [&mut output])
                .expect("execute");
            wall.push(started.elapsed());
            pure.push(Duration::from_nanos(report.execute_ns));

            let started = Instant::now();
            io::input_from_f32(&info.inputs[0], &features, &mut scratch).unwrap();
            graph.execute(&[&scratch], &mut [&mut output]).unwrap();
            io::output_to_f32(&info.outputs[0], &output, &mut result).unwrap();
            f32_path.push(started.elapsed());

            let started = Instant::now();
            output.copy_from_slice(black_box(&input));
            black_box(&output);
            copy.push(started.elapsed());
        }
        let overheads: Vec<Duration> = wall
            .iter()
            .zip(&pure)
            .map(|(w, p)| w.saturating_sub(*p))
            .collect();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "{:<12} {:>10} {:>12.1} {:>14.1} {:>12.2} {:>12.1} {:>12.1}",
            label,
            bytes,
            us(median(wall)),
            us(median(pure)),
            us(median(overheads)),
            us(median(f32_path)),
            us(median(copy)),
        );
    }
}
