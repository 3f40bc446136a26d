//! A context binary from fuzz bytes, read the two ways a load reads it: qnn_sim's own decoder
//! (`qnn_sim::format::decode`, linked in and instrumented), and the runtime's metadata
//! validation through a QnnSystem library (`qnn::inspect::binary_info`, which calls
//! `metadata::read_binary` on qnn_sim's cdylib, found by `QNN_SIM_LIB`), then the pre-flight
//! verdict and requirements over what it read.
//!
//! Properties: nothing panics; every failure is a `qnn::Error` with a message; the runtime never
//! accepts a binary qnn_sim's decoder refuses; a decoded model re-encodes to a fixed point.
//!
//! qnn_sim checks a payload length and checksum in the header, which random mutation would
//! never satisfy, so a buffer that starts with the magic gets both rewritten before it is read
//! (the first byte after the header then starts the sections, where the parser is).

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use qnn::preflight::{self, DevicePlatform, Mode, RuntimeSide};
use qnn_sim::format;

fn sim_lib() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let path = std::env::var_os("QNN_SIM_LIB")
            .map(PathBuf::from)
            .expect("QNN_SIM_LIB must name qnn_sim's cdylib (libqnn_sim.so); .ci/fuzz.sh sets it");
        assert!(
            path.is_file(),
            "QNN_SIM_LIB={} is not a file",
            path.display()
        );
        path
    })
}

/// The runtimes the verdict is judged against: qnn_sim's own backend as it reports itself, and
/// a hardware-like HTP (QCS6490, v68, 4 MiB of VTCM) so the device rules run too.
fn runtimes() -> &'static [RuntimeSide; 2] {
    static SIDES: OnceLock<[RuntimeSide; 2]> = OnceLock::new();
    SIDES.get_or_init(|| {
        let lib = qnn::inspect::backend_library(sim_lib()).expect("qnn_sim's backend opens");
        let sim = RuntimeSide::new(
            lib.backend_id,
            lib.build_id.clone(),
            lib.core_api,
            lib.backend_api,
            None,
        );
        let device = RuntimeSide {
            device: Some(DevicePlatform {
                soc_model: Some(35),
                dsp_arch: Some(68),
                vtcm_size: Some(4 << 20),
            }),
            ..sim.clone()
        };
        [sim, device]
    })
}

/// `data` with a valid payload length and checksum when it starts with qnn_sim's magic.
fn with_valid_header(data: &[u8]) -> Vec<u8> {
    let mut bytes = data.to_vec();
    if bytes.len() >= format::HEADER_LEN && bytes[..8] == format::MAGIC {
        let payload = &bytes[format::HEADER_LEN..];
        let (len, sum) = (payload.len() as u64, format::fnv1a64(payload));
        bytes[16..24].copy_from_slice(&len.to_le_bytes());
        bytes[24..32].copy_from_slice(&sum.to_le_bytes());
    }
    bytes
}

fuzz_target!(|data: &[u8]| {
    let bytes = with_valid_header(data);
    let decoded = format::decode(&bytes);
    if let Ok(model) = &decoded {
        let encoded = format::encode(model);
        let again = format::decode(&encoded).expect("a decoded model's encoding decodes");
        assert_eq!(
            format::encode(&again),
            encoded,
            "encode is not a fixed point"
        );
    }

    match qnn::inspect::binary_info(sim_lib(), &bytes) {
        Ok(info) => {
            if let Err(e) = &decoded {
                panic!("the runtime read a binary qnn_sim refuses ({e}): {info:?}");
            }
            for runtime in runtimes() {
                for mode in [Mode::Off, Mode::On, Mode::Strict] {
                    let verdict = preflight::check(&info, runtime, mode);
                    for finding in verdict.refusals.iter().chain(&verdict.warnings) {
                        assert!(!finding.message.is_empty(), "{finding:?}");
                    }
                    if mode == Mode::Off {
                        assert_eq!(verdict, Default::default());
                    }
                }
            }
            let requirements = preflight::requirements(&info);
            assert!(!requirements.is_empty());
        }
        Err(e) => assert!(!e.to_string().is_empty(), "{e:?}"),
    }
});
