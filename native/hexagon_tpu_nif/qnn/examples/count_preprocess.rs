//! The preprocessing pass run K times on one frame, for counting instructions: `bench/aarch64/count.sh`
//! runs this program for aarch64 under `qemu-aarch64` with an instruction-counting plugin, once
//! with K1 and once with K2 runs, and divides the difference by `(K2 - K1) * output pixels`, so
//! that start-up (the loader, `Plan::new`'s tables, the frame's making) is left out.
//!
//! `count_preprocess CASE PATH K [DIR]`, with
//!
//! * CASE: `letterbox720` (NV12 1280x720 -> 640x640 letterbox bilinear NCHW u8, identity
//!   normalization, pad 114), `letterbox1080` (the same from 1920x1080), `imagenet224` (NV12
//!   1280x720 -> 224x224 bilinear NHWC, ImageNet mean and std, u8 scale 0.018658 offset -114),
//!   `nearest720` (as `letterbox720` with nearest): issue 31's cases, stated here only;
//! * PATH: `run` ([`Plan::run`], the vectorized kernels chosen at run time: NEON on aarch64,
//!   AVX2 on x86-64), `portable` ([`Plan::run_portable`]), or `memcpy` (a copy of the output's
//!   size, the floor);
//! * K: how many passes after one untimed warm-up pass (K = 0: the warm-up alone);
//! * DIR: if given, the frame is written to `DIR/frame` and the output to `DIR/out` (what
//!   `bench/aarch64/opencv_steps.py` runs on, and compares with).
//!
//! The frame is xorshift bytes (random chroma). It prints the case's output pixels, a checksum
//! of the output (the same for `run` and `portable`) and where `main` was loaded
//! (`bench/aarch64/symbols.py` finds the load address of the executable from it, to name the
//! blocks of a profile); then the median and fastest of the K passes' times, which is how the
//! pass alone is timed on this machine
//! (`cargo run -p qnn --release --example count_preprocess letterbox720 run 101`).

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use qnn::preprocess::{FrameFormat, Layout, Output, PixelFormat, Plan, Rect, Resize, Spec};
use qnn::quant::QuantType;

/// Issue 31's cases.
fn spec(name: &str) -> Option<Spec> {
    let (sw, sh, dw, dh, letterbox, layout, resize) = match name {
        "letterbox720" => (1280, 720, 640, 640, true, Layout::Nchw, Resize::Bilinear),
        "letterbox1080" => (1920, 1080, 640, 640, true, Layout::Nchw, Resize::Bilinear),
        "imagenet224" => (1280, 720, 224, 224, false, Layout::Nhwc, Resize::Bilinear),
        "nearest720" => (1280, 720, 640, 640, true, Layout::Nchw, Resize::Nearest),
        _ => return None,
    };
    let content = letterbox.then(|| {
        // the width binds for these frames: round(h * W / w) high, centred
        let ch = ((sh * dw) as f64 / sw as f64).round() as usize;
        Rect {
            x: 0,
            y: (dh - ch) / 2,
            width: dw,
            height: ch,
        }
    });
    Some(Spec {
        src_width: sw,
        src_height: sh,
        dst_width: dw,
        dst_height: dh,
        resize,
        layout,
        swap_rb: false,
        divisor: 255.0,
        mean: if letterbox {
            [0.0; 3]
        } else {
            [0.485, 0.456, 0.406]
        },
        std: if letterbox {
            [1.0; 3]
        } else {
            [0.229, 0.224, 0.225]
        },
        output: Output::Quantized {
            ty: QuantType::U8,
            scale: if letterbox { 1.0 / 255.0 } else { 0.018_658 },
            offset: if letterbox { 0 } else { -114 },
            range: (0, 255),
        },
        frame: FrameFormat {
            format: PixelFormat::Nv12,
            ..FrameFormat::default()
        },
        crop: None,
        content,
        pad: [114; 3],
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: count_preprocess letterbox720|letterbox1080|imagenet224|nearest720 \
                 run|portable|memcpy K [DIR]";
    let (Some(spec), Some(path), Some(k)) = (
        args.first().and_then(|c| spec(c)),
        args.get(1)
            .filter(|p| ["run", "portable", "memcpy"].contains(&p.as_str())),
        args.get(2).and_then(|k| k.parse::<usize>().ok()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let plan = match Plan::new(spec) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("count_preprocess: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let src: Vec<u8> = (0..plan.src_len())
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect();
    let mut dst = vec![0u8; plan.dst_len()];
    let copy_from = vec![7u8; plan.dst_len()];
    let pass = |dst: &mut [u8]| match path.as_str() {
        "run" => plan.run(black_box(&src), dst),
        "portable" => plan.run_portable(black_box(&src), dst),
        _ => {
            dst.copy_from_slice(black_box(&copy_from));
            Ok(())
        }
    };
    let mut times = Vec::with_capacity(k);
    for i in 0..=k {
        let started = Instant::now();
        if let Err(e) = pass(black_box(&mut dst)) {
            eprintln!("count_preprocess: {e}");
            return ExitCode::FAILURE;
        }
        if i > 0 {
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    let sum = dst.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    if let Some(dir) = args.get(3).map(std::path::Path::new) {
        for (name, bytes) in [("frame", &src), ("out", &dst)] {
            if let Err(e) = std::fs::write(dir.join(name), bytes) {
                eprintln!("count_preprocess: {}: {e}", dir.join(name).display());
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "pixels {} checksum {sum:016x} main_at {:#x}",
        spec.dst_width * spec.dst_height,
        main as fn() -> ExitCode as usize
    );
    if let (Some(median), Some(fastest)) = (times.get(times.len() / 2), times.first()) {
        println!("median_ms {median:.3} fastest_ms {fastest:.3}");
    }
    ExitCode::SUCCESS
}
