//! The device's platform info (`deviceGetPlatformInfo`) in the runtime and in the pre-flight
//! verdict, on qnn_sim's `device_platform` knob. Runs natively (x86_64: the info is reported but
//! not judged, as Qualcomm's x86 HTP library is an emulator) and under qemu (aarch64: judged).

mod common;

use common::*;
use qnn::Site;
use qnn::preflight::{DevicePlatform, PLATFORM_IS_HARDWARE, Reason};
use qnn::sim_probe::configure;
use qnn::{Context, Runtime};
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::{Stamp, TensorSpec};

fn stamped(soc_model: u32, dsp_arch: u32) -> Vec<u8> {
    ModelBuilder::new()
        .graph("g", |g| {
            let x = g.input("x", TensorSpec::f32([1, 4]));
            let y = g.identity("y", x, TensorSpec::f32([1, 4]));
            g.output(y);
        })
        .stamp(Stamp {
            soc_model: Some(soc_model),
            dsp_arch: Some(dsp_arch),
            ..Stamp::default()
        })
        .build()
        .unwrap()
}

#[test]
fn the_runtime_reports_the_device_and_the_verdict_judges_it_on_hardware() {
    let lib = fresh_library();
    configure(
        &lib,
        "device_platform",
        "soc_model=35,htp_arch=68,vtcm_mb=4",
    )
    .unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    assert_eq!(
        runtime.info().device,
        Some(DevicePlatform {
            soc_model: Some(35),
            dsp_arch: Some(68),
            vtcm_size: Some(4 * 1024 * 1024),
        })
    );

    // Made for this device: no finding anywhere.
    let context = Context::from_bytes(&runtime, &stamped(35, 68), &Site::here()).unwrap();
    assert!(context.warnings().is_empty());
    drop(context);

    // Made for another SoC and arch: two warnings where the device is hardware.
    let context = Context::from_bytes(&runtime, &stamped(43, 73), &Site::here()).unwrap();
    let reasons: Vec<Reason> = context.warnings().iter().map(|f| f.reason).collect();
    if PLATFORM_IS_HARDWARE {
        assert_eq!(reasons, [Reason::WrongSoc, Reason::WrongHtpArch]);
        assert!(context.warnings()[0].message.contains("SoC model 43"));
        assert!(context.warnings()[1].message.contains("v73"));
    } else {
        assert_eq!(reasons, []);
    }
    drop((context, runtime));
    // Every platform info handed out was freed (qnn_sim refuses a second free, and counts
    // answers still out as live), and so was every handle.
    assert_all_freed(&lib);
}

#[test]
fn a_backend_without_platform_info_reports_none() {
    // The default knob answers NOT_SUPPORTED; a NULL entry is not called at all.
    for nulls in ["", "deviceGetPlatformInfo"] {
        let lib = fresh_library();
        configure(&lib, "null_entries", nulls).unwrap();
        let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
        assert_eq!(runtime.info().device, None);
        drop(runtime);
        assert_all_freed(&lib);
    }
}
