//! Every rule, table-driven.

use super::verdict::situations::{V247, V251, device, runtime, tripped};
use super::*;
use crate::model::metadata::BinaryInfo;

const V248: &str = "v2.48.40.260702151143";
const V249: &str = "v2.49.40.260810104044";
const V242: &str = "v2.42.0.251225135753_193295";

type Parsed = Option<(u32, u32, u32)>;

#[test]
fn build_ids_parse() {
    let cases: &[(&str, Parsed)] = &[
        (V247, Some((2, 47, 0))),
        (V248, Some((2, 48, 40))),
        (V251, Some((2, 51, 0))),
        (V242, Some((2, 42, 0))),
        ("2.51.0", Some((2, 51, 0))),
        ("v2.51.0", Some((2, 51, 0))),
        (" v2.51.0.1 ", Some((2, 51, 0))),
        ("v2.51", None),
        ("v2.51.", None),
        ("v2.51.0.", None),
        ("v2.x.0.1", None),
        ("v-2.51.0.1", None),
        ("", None),
        ("qnn_sim v0.2.0 (format 1)", None),
        ("v99999999999.1.0.1", None),
    ];
    for &(s, want) in cases {
        let got = BuildId::parse(s).map(|b| (b.version.major, b.version.minor, b.version.patch));
        assert_eq!(got, want, "{s:?}");
    }
}

/// (binary build id, runtime build id, expected: None = no finding, Some(refused?)).
#[test]
fn build_id_rule() {
    let cases: &[(&str, &str, Option<Evidence>)] = &[
        // Measured on the emulators: every newer binary fails, every older one loads.
        (V251, V247, Some(Evidence::Measured)),
        (V249, V248, Some(Evidence::Measured)), // same context blob 4.0.4, still refused
        (V248, V247, Some(Evidence::Measured)),
        (V251, V242, Some(Evidence::Measured)),
        (V247, V251, None),
        (V248, V249, None),
        (V251, V251, None),
        // Same major.minor.patch, other build: not refused.
        ("v2.51.0.1", "v2.51.0.2", None),
        ("v2.51.0.2", "v2.51.0.1", None),
        // Unparseable on either side: a warning, never a refusal.
        ("qnn_sim v0.2.0 (format 1)", V251, Some(Evidence::Read)),
        (V251, "", Some(Evidence::Read)),
        ("", V251, Some(Evidence::Read)),
        // Identical strings, even unparseable: nothing to say.
        (
            "qnn_sim v0.2.0 (format 1)",
            "qnn_sim v0.2.0 (format 1)",
            None,
        ),
        ("", "", None),
    ];
    for &(b, r, want) in cases {
        let got = check_build_id(&BinaryInfo::for_tests(b), &runtime(r));
        assert_eq!(got.as_ref().map(|f| f.evidence), want, "{b:?} on {r:?}");
        if let Some(f) = got {
            assert_eq!(f.reason, Reason::BinaryNewerThanRuntime);
            // Both sides are named.
            assert!(f.message.contains(b) || b.is_empty(), "{}", f.message);
            assert!(f.message.contains(r) || r.is_empty(), "{}", f.message);
        }
    }
    let f = check_build_id(&BinaryInfo::for_tests(V251), &runtime(V247)).unwrap();
    assert!(f.message.contains("QAIRT 2.51.0"), "{}", f.message);
    assert!(
        f.message
            .contains("Compile the model with QAIRT 2.47.0 or older")
    );
    assert!(f.message.contains("install the QAIRT 2.51.0 runtime"));
}

#[test]
fn backend_rule() {
    let cases: &[(u32, u32, bool)] = &[
        (6, 6, false),
        (6, 4, true),
        (4, 6, true),
        (0, 6, false),
        (6, 0, false),
        (0, 0, false),
    ];
    for &(b, r, mismatch) in cases {
        let mut bin = BinaryInfo::for_tests(V251);
        bin.backend_id = b;
        let mut rt = runtime(V251);
        rt.backend_id = r;
        let got = check_backend(&bin, &rt);
        assert_eq!(got.is_some(), mismatch, "{b} on {r}");
        if let Some(f) = got {
            assert_eq!(
                (f.reason, f.evidence),
                (Reason::WrongBackend, Evidence::Read)
            );
        }
    }
}

#[test]
fn soc_rule() {
    let cases: &[(Option<u32>, Option<DevicePlatform>, bool)] = &[
        (Some(35), Some(device(Some(35), None)), false),
        (Some(35), Some(device(Some(43), None)), true),
        (Some(0), Some(device(Some(43), None)), false), // compiled without a SoC
        (None, Some(device(Some(43), None)), false),    // BinaryInfo v1/v2
        (Some(35), Some(device(None, None)), false),
        (Some(35), Some(device(Some(0), None)), false),
        (Some(35), None, false), // no platform info (the emulator)
    ];
    for (b, d, mismatch) in cases {
        let mut bin = BinaryInfo::for_tests(V251);
        bin.soc_model = *b;
        let got = check_soc(&bin, d.as_ref());
        assert_eq!(got.is_some(), *mismatch, "{b:?} on {d:?}");
        if let Some(f) = got {
            assert_eq!((f.reason, f.evidence), (Reason::WrongSoc, Evidence::Read));
            assert!(f.message.contains("SoC model 35") && f.message.contains("43"));
        }
    }
}

#[test]
fn htp_arch_rule() {
    let cases: &[(Option<u32>, Option<DevicePlatform>, bool)] = &[
        (Some(68), Some(device(None, Some(68))), false),
        (Some(73), Some(device(None, Some(68))), true),
        (Some(0), Some(device(None, Some(68))), false),
        (None, Some(device(None, Some(68))), false),
        (Some(73), Some(device(None, None)), false),
        (Some(73), None, false),
    ];
    for (b, d, mismatch) in cases {
        let mut bin = BinaryInfo::for_tests(V251);
        bin.dsp_arch = *b;
        let got = check_htp_arch(&bin, d.as_ref());
        assert_eq!(got.is_some(), *mismatch, "{b:?} on {d:?}");
        if let Some(f) = got {
            assert_eq!(
                (f.reason, f.evidence),
                (Reason::WrongHtpArch, Evidence::Read)
            );
            assert!(f.message.contains("v73") && f.message.contains("v68"));
        }
    }
}

#[test]
fn vtcm_rule() {
    const MB: u64 = 1024 * 1024;
    let with_vtcm = |v: Option<u64>| DevicePlatform {
        vtcm_size: v,
        ..DevicePlatform::default()
    };
    let cases: &[(Option<u64>, Option<DevicePlatform>, bool)] = &[
        (Some(4 * MB), Some(with_vtcm(Some(4 * MB))), false),
        (Some(2 * MB), Some(with_vtcm(Some(4 * MB))), false),
        (Some(8 * MB), Some(with_vtcm(Some(4 * MB))), true),
        (Some(0), Some(with_vtcm(Some(4 * MB))), false), // unset
        (None, Some(with_vtcm(Some(4 * MB))), false),
        (Some(8 * MB), Some(with_vtcm(None)), false),
        (Some(8 * MB), None, false),
    ];
    for (b, d, mismatch) in cases {
        let mut bin = BinaryInfo::for_tests(V251);
        bin.vtcm_size = *b;
        let got = check_vtcm(&bin, d.as_ref());
        assert_eq!(got.is_some(), *mismatch, "{b:?} on {d:?}");
        if let Some(f) = got {
            assert_eq!(
                (f.reason, f.evidence),
                (Reason::InsufficientVtcm, Evidence::Read)
            );
            assert!(f.message.contains("8388608") && f.message.contains("vtcm_mb 4"));
        }
    }
}

#[test]
fn modes_decide_refusal_and_warning() {
    // A measured mismatch (newer binary) and a read one (other SoC).
    let bin = BinaryInfo::for_tests(V251);
    let mut rt = runtime(V247);
    rt.device = Some(device(Some(43), Some(68)));
    let reasons = |fs: &[Finding]| fs.iter().map(|f| f.reason).collect::<Vec<_>>();

    let on = check(&bin, &rt, Mode::On);
    assert_eq!(reasons(&on.refusals), [Reason::BinaryNewerThanRuntime]);
    assert_eq!(reasons(&on.warnings), [Reason::WrongSoc]);

    let strict = check(&bin, &rt, Mode::Strict);
    assert_eq!(
        reasons(&strict.refusals),
        [Reason::BinaryNewerThanRuntime, Reason::WrongSoc]
    );
    assert!(strict.warnings.is_empty());

    assert_eq!(check(&bin, &rt, Mode::Off), Verdict::default());

    // A fitting binary: nothing at all.
    let mut fits = runtime(V251);
    fits.device = Some(device(Some(35), Some(68)));
    assert_eq!(check(&bin, &fits, Mode::Strict), Verdict::default());
}

#[test]
fn data_format_rule() {
    assert!(check_data_format(0, "input x").is_ok());
    for format in [1, 2, 3, 4, 7, 8, 9, 11, 12, 0x7FFF_FFFF] {
        let f = check_data_format(format, "input x").unwrap_err();
        assert_eq!(
            (f.reason, f.evidence),
            (Reason::UnsupportedTensorFormat, Evidence::Own)
        );
        assert!(
            f.message.starts_with("input x uses data format"),
            "{}",
            f.message
        );
    }
}

#[test]
fn encoding_rule() {
    let cases: &[(u32, Option<EncodingSupport>)] = &[
        (0, Some(EncodingSupport::Converted)),
        (1, Some(EncodingSupport::Converted)),
        (2, Some(EncodingSupport::Converted)),
        (3, Some(EncodingSupport::Converted)),
        (4, Some(EncodingSupport::Raw("block"))),
        (7, Some(EncodingSupport::Raw("float_block"))),
        (11, Some(EncodingSupport::Raw("bw_float_block"))),
        (0x7FFF_FFFF, Some(EncodingSupport::None)),
        (12, None),
        (0x1234, None),
        (0x7FFF_FFFE, None),
    ];
    for &(encoding, want) in cases {
        let got = check_encoding(encoding, "output y");
        match want {
            Some(support) => assert_eq!(got, Ok(support), "{encoding}"),
            None => {
                let f = got.unwrap_err();
                assert_eq!(
                    (f.reason, f.evidence),
                    (Reason::UnsupportedEncoding, Evidence::Own)
                );
            }
        }
    }
}

#[test]
fn requirements_name_what_a_runtime_needs() {
    assert_eq!(
        requirements(&BinaryInfo::for_tests(V251)),
        [
            "QAIRT >= 2.51.0",
            "HTP (6) backend",
            "SoC model 35",
            "HTP v68",
            "VTCM >= 4194304 bytes"
        ]
    );
    let mut bare = BinaryInfo::for_tests("qnn_sim");
    bare.soc_model = Some(0);
    bare.dsp_arch = None;
    bare.vtcm_size = None;
    let got = requirements(&bare);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].contains("\"qnn_sim\""));
}

/// `reason`'s situation trips exactly `reason`, known as its rule says.
fn assert_trips(reason: Reason) {
    let found = tripped(reason);
    let got: Vec<_> = found.iter().map(|f| (f.reason, f.evidence)).collect();
    assert_eq!(
        got,
        [(reason, reason.rule().evidence)],
        "{reason}: {found:?}"
    );
}

#[test]
fn binary_newer_than_runtime_trips() {
    assert_trips(Reason::BinaryNewerThanRuntime);
}

#[test]
fn wrong_backend_trips() {
    assert_trips(Reason::WrongBackend);
}

#[test]
fn wrong_soc_trips() {
    assert_trips(Reason::WrongSoc);
}

#[test]
fn wrong_htp_arch_trips() {
    assert_trips(Reason::WrongHtpArch);
}

#[test]
fn insufficient_vtcm_trips() {
    assert_trips(Reason::InsufficientVtcm);
}

#[test]
fn unsupported_tensor_format_trips() {
    assert_trips(Reason::UnsupportedTensorFormat);
}

#[test]
fn unsupported_encoding_trips() {
    assert_trips(Reason::UnsupportedEncoding);
}

#[test]
fn every_reason_has_one_rule_and_one_situation() {
    // `Reason::ALL` comes from the enum's own declaration; each reason's rule and situation are
    // matches the compiler holds exhaustive. What is left to check: atoms are distinct, and
    // every reason trips.
    for (i, &r) in Reason::ALL.iter().enumerate() {
        assert!(
            Reason::ALL[..i].iter().all(|&o| o.as_str() != r.as_str()),
            "{r}"
        );
        assert!(!r.rule().compares.is_empty() && !r.rule().source.is_empty());
        assert_trips(r);
    }
    // The checks run in `ALL`'s order (the docs table's): a binary tripping every header rule.
    let everything = check(
        &BinaryInfo {
            backend_id: 4,
            vtcm_size: Some(8 * 1024 * 1024),
            ..BinaryInfo::for_tests(V251)
        },
        &RuntimeSide {
            device: Some(DevicePlatform {
                soc_model: Some(43),
                dsp_arch: Some(73),
                vtcm_size: Some(4 * 1024 * 1024),
            }),
            ..runtime(V247)
        },
        Mode::Strict,
    );
    let order: Vec<_> = everything.refusals.iter().map(|f| f.reason).collect();
    assert_eq!(order, Reason::ALL[..order.len()]);
    assert_eq!(order.len(), 5);
}

/// The repository's root (qnn is `native/hexagon_tpu_nif/qnn`).
fn repo_file(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .join(path)
}

const TABLE_BEGIN: &str = "<!-- rules table: generated from Reason::rule";
const TABLE_END: &str = "<!-- end of the rules table -->";

/// `docs/preflight.md`'s table, as the rules state it.
fn rules_table() -> String {
    let mut out = String::from("| reason | compares | evidence | source |\n|---|---|---|---|\n");
    for &r in Reason::ALL {
        let rule = r.rule();
        out.push_str(&format!(
            "| `:{}` | {} | {} | {} |\n",
            r.as_str(),
            rule.compares,
            rule.evidence.as_str(),
            rule.source
        ));
    }
    out
}

#[test]
fn the_docs_table_is_the_rules() {
    let path = repo_file("docs/preflight.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let begin = doc.find(TABLE_BEGIN).expect("the table's begin marker");
    let body = begin + doc[begin..].find('\n').unwrap() + 1;
    let end = body + doc[body..].find(TABLE_END).expect("the table's end marker");
    let want = rules_table();
    if doc[body..end] == want {
        return;
    }
    if std::env::var_os("HEXAGON_TPU_BLESS").is_some() {
        let fresh = format!("{}{want}{}", &doc[..body], &doc[end..]);
        std::fs::write(&path, fresh).unwrap();
        return;
    }
    panic!(
        "docs/preflight.md's table differs from the rules (base/preflight_rules.rs, Reason::rule); \
         regenerate it with `HEXAGON_TPU_BLESS=1 cargo test -p qnn --lib preflight`:\n{want}"
    );
}

#[test]
fn error_ex_lists_every_reason() {
    let error_ex = std::fs::read_to_string(repo_file("lib/hexagon_tpu/error.ex")).unwrap();
    for &r in Reason::ALL {
        let atom = format!(":{}", r.as_str());
        assert!(
            error_ex.contains(&format!("| {atom}\n")),
            "lib/hexagon_tpu/error.ex: @type reason lacks {atom}"
        );
        assert!(
            error_ex.contains(&format!("`{atom}`")),
            "lib/hexagon_tpu/error.ex: the moduledoc's Reasons list lacks `{atom}`"
        );
    }
}
