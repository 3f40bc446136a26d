//! The pre-flight verdict on the load path: for each reason a qnn_sim binary can carry, a binary
//! that trips it, loaded through `Context::load_with`, is refused with exactly that reason and no
//! QNN context is made. The rules themselves are tested case by case in `qnn/src/model/preflight/tests.rs`;
//! the device rules (SoC, arch, VTCM) are judged only where the platform is hardware
//! (`platform.rs` runs them under qemu; qnn_sim's stamp reports no VTCM).

mod common;

use std::sync::{Arc, mpsc};

use common::*;
use qnn::context::LoadOptions;
use qnn::preflight::{Mode, Reason};
use qnn::sim_probe::configure;
use qnn::{Context, Error, Runtime, Site};
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::{AdversarialKind, DType, Quant, Stamp, TensorSpec};

const RUNTIME_BUILD: &str = "v2.47.0.260601114230";

fn model(stamp: Stamp, adversarial: Option<AdversarialKind>) -> Vec<u8> {
    let spec = TensorSpec::new(DType::UFixed8, [1, 4]).quant(Quant::per_tensor(0.05, -128));
    let mut builder = ModelBuilder::new()
        .graph("g", |g| {
            let x = g.input("x", spec.clone());
            let y = g.identity("y", x, spec.clone());
            g.output(y);
        })
        .stamp(Stamp {
            build_id: Some(stamp.build_id.unwrap_or_else(|| RUNTIME_BUILD.into())),
            ..stamp
        });
    if let Some(kind) = adversarial {
        builder = builder.adversarial(kind);
    }
    builder.build().unwrap()
}

fn load(runtime: &Arc<Runtime>, binary: Vec<u8>, preflight: Mode) -> qnn::Result<Arc<Context>> {
    let options = LoadOptions {
        preflight,
        ..LoadOptions::default()
    };
    let (tx, rx) = mpsc::sync_channel(1);
    let done = Box::new(move |result| tx.send(result).unwrap());
    Context::load_with(runtime, binary, None, &Site::here(), options, done);
    rx.recv().unwrap()
}

/// The binary that trips `reason` on this runtime, and the mode it is refused in; `None` where
/// qnn_sim cannot make one here. A match on every reason: a new one needs its case.
fn tripping(reason: Reason) -> Option<(Vec<u8>, Mode)> {
    let stamp = Stamp::default();
    Some(match reason {
        Reason::BinaryNewerThanRuntime => (
            model(
                Stamp {
                    build_id: Some("v2.51.0.260929181845".into()),
                    ..stamp
                },
                None,
            ),
            Mode::On,
        ),
        Reason::WrongBackend => (
            model(
                Stamp {
                    backend_id: Some(4),
                    ..stamp
                },
                None,
            ),
            Mode::Strict,
        ),
        // Judged only on hardware, and qnn_sim's binaries report no VTCM: `platform.rs`.
        Reason::WrongSoc | Reason::WrongHtpArch | Reason::InsufficientVtcm => return None,
        // Own limits: refused whatever the mode, even with the verdict off.
        Reason::UnsupportedTensorFormat => (
            model(stamp, Some(AdversarialKind::SparseDataFormat)),
            Mode::Off,
        ),
        Reason::UnsupportedEncoding => (
            model(stamp, Some(AdversarialKind::UnknownEncoding)),
            Mode::Off,
        ),
    })
}

#[test]
fn each_reason_refuses_its_binary_before_qnn_is_asked() {
    let lib = fresh_library();
    configure(&lib, "build_id", RUNTIME_BUILD).unwrap();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    let before = live_handles(&lib);
    let mut tried = 0;
    for &reason in Reason::ALL {
        let Some((binary, mode)) = tripping(reason) else {
            continue;
        };
        match load(&runtime, binary, mode) {
            Err(Error::Preflight {
                reason: got,
                message,
            }) => {
                assert_eq!(got, reason, "{message}");
                assert_eq!(
                    Error::Preflight {
                        reason: got,
                        message
                    }
                    .reason(),
                    reason.as_str()
                );
            }
            other => panic!("{reason}: {other:?}"),
        }
        assert_eq!(
            live_handles(&lib),
            before,
            "{reason}: a QNN context was made"
        );
        tried += 1;
    }
    assert_eq!(tried, 4);
    // The same runtime loads a fitting binary.
    let context = load(&runtime, model(Stamp::default(), None), Mode::Strict).unwrap();
    assert!(context.warnings().is_empty());
    drop((context, runtime));
    assert_all_freed(&lib);
}
