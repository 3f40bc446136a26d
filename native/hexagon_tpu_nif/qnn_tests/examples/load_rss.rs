//! What loading a context binary adds to the process's peak memory, against the file's size.
//!
//! Builds qnn_sim models holding one constant of 16, 64 and 256 MiB, writes each to a file,
//! and for each load prints: the peak RSS the load added (VmHWM, reset before each load through
//! /proc/self/clear_refs), what stays resident after the load (the backend's own copy of the
//! weights: qnn_sim keeps them, as QNN keeps what it needs), and the difference, the
//! load's transient share (the mapping of the file, released when the load returns). A corrupt
//! file of the same size shows what a rejected load costs: only the pages QNN read.
//!
//! Run: `cargo build --release -p qnn_sim && cargo run --release -p qnn_tests --example load_rss`.

use std::io::Write;

use qnn::Context;
use qnn::Site;
use qnn_sim::builder::{ConstData, ModelBuilder};
use qnn_sim::model::{DType, Quant, TensorSpec};

mod common;

const MIB: u64 = 1 << 20;

/// (current RSS, peak RSS) in bytes, from /proc/self/status.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .expect("an RSS field")
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS");
}

fn model_of(bytes: usize) -> Vec<u8> {
    let spec = TensorSpec::new(DType::UFixed8, [1, 1]).quant(Quant::per_tensor(1.0, 0));
    let weights =
        TensorSpec::new(DType::UFixed8, [1, bytes as u32]).quant(Quant::per_tensor(1.0, 0));
    ModelBuilder::new()
        .graph("big", |g| {
            let x = g.input("x", spec.clone());
            let _w = g.constant("w", weights, ConstData::Bytes(vec![1u8; bytes]));
            let y = g.identity("y", x, spec.clone());
            g.output(y);
        })
        .build()
        .expect("model")
}

fn main() {
    let runtime = common::sim_runtime();
    let dir = std::env::temp_dir().join(format!("qnn_load_rss_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    println!(
        "{:<10} {:>10} {:>14} {:>12} {:>14} {:>16}",
        "model", "file MiB", "peak added", "kept", "transient", "corrupt: peak"
    );
    for size in [16 * MIB, 64 * MIB, 256 * MIB] {
        let path = dir.join(format!("big_{}.bin", size / MIB));
        let bytes = model_of(size as usize);
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(&bytes))
            .expect("write the model");
        let file_len = bytes.len() as u64;
        drop(bytes);

        reset_peak();
        let (before, _) = rss();
        let context = Context::from_file(&runtime, &path, &Site::here()).expect("load");
        let (after, peak) = rss();
        let added = peak.saturating_sub(before);
        let kept = after.saturating_sub(before);
        context.close().expect("close");

        // Same size, garbage after the first page: QNN rejects it after reading little.
        let mut junk = std::fs::read(&path).expect("read back");
        junk[8..].iter_mut().for_each(|b| *b = 0xA5);
        std::fs::write(&path, &junk).expect("corrupt");
        drop(junk);
        reset_peak();
        let (before, _) = rss();
        assert!(Context::from_file(&runtime, &path, &Site::here()).is_err());
        let (_, junk_peak) = rss();
        std::fs::remove_file(&path).ok();

        let ratio = |b: u64| b as f64 / file_len as f64;
        println!(
            "{:<10} {:>10.1} {:>9.1} MiB {:>5.2}x {:>7.1} MiB {:>9.1} MiB {:>5.2}x {:>10.2} MiB",
            format!("{} MiB", size / MIB),
            file_len as f64 / MIB as f64,
            added as f64 / MIB as f64,
            ratio(added),
            kept as f64 / MIB as f64,
            added.saturating_sub(kept) as f64 / MIB as f64,
            ratio(added.saturating_sub(kept)),
            junk_peak.saturating_sub(before) as f64 / MIB as f64,
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
