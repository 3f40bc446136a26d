//! Context-binary format: round trip, and every corruption rejected without a panic.

mod common;
mod models;

use qnn_sim::format::{self, FormatError, HEADER_LEN};
use qnn_sim::model::*;

fn small() -> Vec<u8> {
    models::identity_f32("g", 2).build().unwrap()
}

#[test]
fn round_trip_is_exact() {
    let m = models::classifier()
        .sleep_ms(3)
        .fail_execute(Fault {
            code: 1007,
            after: 2,
            times: Some(3),
            scope: FaultScope::Context,
            graph: Some("classifier".into()),
        })
        .fail_context_create(Fault::once(5005))
        .adversarial_on(AdversarialKind::ZeroDim, Some("classifier"), Some("probs"))
        .metadata_versions(1, 2, 1)
        .soc_version("sm8550")
        .build_model()
        .unwrap();
    let bytes = format::encode(&m);
    assert_eq!(format::decode(&bytes).unwrap(), m);
    assert_eq!(
        format::read_header(&bytes).unwrap(),
        format::fnv1a64(&bytes[HEADER_LEN..])
    );
}

#[test]
fn every_truncation_is_rejected() {
    let b = small();
    for len in 0..b.len() {
        assert!(
            matches!(format::decode(&b[..len]), Err(FormatError::Malformed(_))),
            "truncated at {len} accepted"
        );
    }
    assert!(format::decode(&b).is_ok());
}

#[test]
fn every_byte_flip_is_rejected() {
    let b = small();
    for i in 0..b.len() {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut c = b.clone();
            c[i] ^= mask;
            let r = format::decode(&c);
            if (8..12).contains(&i) {
                assert!(
                    matches!(r, Err(FormatError::UnsupportedVersion(_))),
                    "version byte {i}"
                );
            } else {
                assert!(
                    matches!(r, Err(FormatError::Malformed(_))),
                    "flip at {i} mask {mask:#x} accepted"
                );
            }
        }
    }
}

#[test]
fn trailing_bytes_and_empty_and_wrong_magic() {
    let mut b = small();
    b.push(0);
    assert!(format::decode(&b).is_err());
    assert!(format::decode(&[]).is_err());
    assert!(format::decode(b"QNNSIMCA\x01\0\0\0").is_err());
    assert!(format::decode(b"not a model at all, just some text").is_err());
}

#[test]
fn unknown_version_is_reported_as_such() {
    let b = models::identity_f32("g", 2)
        .format_version(2)
        .build()
        .unwrap();
    assert_eq!(format::decode(&b), Err(FormatError::UnsupportedVersion(2)));
}

/// Rewrites the checksum so only the structural checks can catch a change.
fn reseal(b: &mut [u8]) {
    let sum = format::fnv1a64(&b[HEADER_LEN..]);
    b[24..32].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn resealed_corruptions_are_rejected_without_panicking() {
    // With a valid checksum, every mutation must still be caught by bounds or validation
    // (or decode to a model that validates); none may panic or allocate absurdly.
    let b = models::classifier().build().unwrap();
    for i in HEADER_LEN..b.len() {
        for v in [0x00u8, 0xFF, 0x7F, 0x40] {
            let mut c = b.clone();
            c[i] = v;
            reseal(&mut c);
            if let Ok(m) = format::decode(&c) {
                m.validate().unwrap();
            }
        }
    }
}

#[test]
fn absurd_counts_with_valid_checksum_are_rejected() {
    let b = small();
    // First section after the header: META tag (4) + len (4) + str len (4) + "qnn_sim" (7);
    // then GRAPH tag, len, name len, "g", tensor count.
    let count_at = HEADER_LEN + 4 + 4 + 4 + 7 + 4 + 4 + 4 + 1;
    let mut c = b.clone();
    c[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut c);
    assert!(matches!(format::decode(&c), Err(FormatError::Malformed(m)) if m.contains("count")));
}

#[test]
fn unknown_sections_are_skipped() {
    let b = small();
    let mut payload = b[HEADER_LEN..].to_vec();
    payload.extend_from_slice(&99u32.to_le_bytes());
    payload.extend_from_slice(&3u32.to_le_bytes());
    payload.extend_from_slice(b"abc");
    let mut c = b[..HEADER_LEN].to_vec();
    c[16..24].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    c.extend_from_slice(&payload);
    reseal(&mut c);
    assert_eq!(format::decode(&c).unwrap(), format::decode(&b).unwrap());
}

#[test]
fn backend_rejects_corrupt_binaries_with_qnn_codes() {
    use qnn_sys::*;
    let sim = common::Sim::load();
    let s = sim.open();
    let b = small();
    for len in [1, 8, 12, 31, 32, b.len() - 1] {
        assert_eq!(
            sim.create_context(&s, &b[..len]).unwrap_err(),
            QNN_CONTEXT_ERROR_CREATE_FROM_BINARY
        );
        assert_eq!(
            sim.metadata(&b[..len]).unwrap_err(),
            QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY
        );
    }
    let mut c = b.clone();
    c[40] ^= 1;
    assert_eq!(
        sim.create_context(&s, &c).unwrap_err(),
        QNN_CONTEXT_ERROR_CREATE_FROM_BINARY
    );
    let v2 = models::identity_f32("g", 2)
        .format_version(2)
        .build()
        .unwrap();
    assert_eq!(
        sim.create_context(&s, &v2).unwrap_err(),
        QNN_CONTEXT_ERROR_BINARY_VERSION
    );
    assert_eq!(
        sim.metadata(&v2).unwrap_err(),
        QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY
    );
    // Empty buffer: an invalid argument.
    assert_eq!(
        sim.create_context(&s, &[]).unwrap_err(),
        QNN_CONTEXT_ERROR_INVALID_ARGUMENT
    );
    sim.close(s);
    assert_eq!(sim.live(), 0);
}

#[test]
fn builder_reports_model_errors() {
    use qnn_sim::builder::ModelBuilder;
    // Fixed-point without quant, a shape mismatch, an output that is an input.
    let e = ModelBuilder::new()
        .graph("g", |g| {
            let x = g.input("x", TensorSpec::new(DType::UFixed8, [2]));
            let y = g.relu("y", x, TensorSpec::f32([3]));
            g.output(y);
            g.output(x);
        })
        .build()
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("only node outputs"), "{msg}");
    assert!(
        msg.contains("needs quantization") || msg.contains("shapes differ"),
        "{msg}"
    );
    assert!(ModelBuilder::new().build().is_err());
}
