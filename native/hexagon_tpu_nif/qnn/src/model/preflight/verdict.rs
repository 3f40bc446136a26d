//! The verdict over a binary's header: what QnnSystem reads of it ([`BinaryInfo`]) against what
//! the backend reports ([`RuntimeSide`]), before `contextCreateFromBinary` is asked; and what a
//! runtime needs for a binary to load ([`requirements`]). Each check's reason and evidence come
//! from the rules ([`Reason::rule`]).

use crate::base::preflight_rules::{Evidence, Finding, Reason};
use crate::base::version::Version;
use crate::ffi::platform::DevicePlatform;
use crate::model::metadata::BinaryInfo;
use crate::sys;

/// How strictly to judge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// No verdict on versions, backend, SoC or arch (the package's own tensor limits still hold).
    Off,
    /// Measured rules refuse, read rules warn.
    #[default]
    On,
    /// Read rules refuse too.
    Strict,
}

/// The runtime side of the verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeSide {
    pub backend_id: u32,
    /// `backendGetBuildId`, `""` when the library has none.
    pub build_id: String,
    pub core_api: Version,
    pub backend_api: Version,
    /// `None` when the backend reports no platform info (the x86 emulator, qnn_sim).
    pub device: Option<DevicePlatform>,
}

impl RuntimeSide {
    /// The runtime as the verdict sees it: its device only where [`PLATFORM_IS_HARDWARE`].
    pub fn new(
        backend_id: u32,
        build_id: String,
        core_api: Version,
        backend_api: Version,
        device: Option<DevicePlatform>,
    ) -> RuntimeSide {
        RuntimeSide {
            backend_id,
            build_id,
            core_api,
            backend_api,
            device: device.filter(|_| PLATFORM_IS_HARDWARE),
        }
    }
}

/// Whether a backend's platform info describes the hardware a binary will run on. Qualcomm's HTP
/// library for x86_64 is the emulator: it reports a default device (SoC model 30, v68, 4 MB of
/// VTCM; measured on QAIRT 2.47 and 2.51) whatever the binary was made for, and loads binaries made
/// for other SoCs and arches. HTP hardware is reached from aarch64 only.
pub const PLATFORM_IS_HARDWARE: bool = cfg!(target_arch = "aarch64");

/// The verdict: refusals (the first becomes the load's error) and warnings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub refusals: Vec<Finding>,
    pub warnings: Vec<Finding>,
}

/// A QAIRT build id, `vMAJOR.MINOR.PATCH.BUILD` (the `v` and the build part optional).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildId {
    pub version: Version,
}

impl BuildId {
    /// Parses `v2.51.0.260929181845` (also `v2.43.0.260127150333_193827`, `2.51.0`); `None`
    /// for anything else.
    pub fn parse(s: &str) -> Option<BuildId> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts = s.splitn(4, '.');
        let mut num = || -> Option<u32> {
            let p = parts.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse().ok()
        };
        let (major, minor, patch) = (num()?, num()?, num()?);
        match parts.next() {
            Some("") => None,
            _ => Some(BuildId {
                version: Version::new(major, minor, patch),
            }),
        }
    }
}

fn backend_name(id: u32) -> String {
    match id {
        sys::QNN_BACKEND_ID_HTP => "HTP (6)".into(),
        other => format!("backend {other}"),
    }
}

fn quoted(s: &str) -> String {
    if s.is_empty() {
        "none".into()
    } else {
        format!("{s:?}")
    }
}

/// The build-id rule.
pub fn check_build_id(binary: &BinaryInfo, runtime: &RuntimeSide) -> Option<Finding> {
    if binary.build_id == runtime.build_id {
        return None;
    }
    match (
        BuildId::parse(&binary.build_id),
        BuildId::parse(&runtime.build_id),
    ) {
        (Some(b), Some(r)) if b.version > r.version => Some(Finding::new(
            Reason::BinaryNewerThanRuntime,
            format!(
                "the binary was made by QAIRT {} (build id {:?}), newer than the runtime's QAIRT {} \
                 (build id {:?}); QNN refuses a binary from a newer QAIRT. Compile the model with \
                 QAIRT {} or older, or install the QAIRT {} runtime (or newer) on the device",
                b.version, binary.build_id, r.version, runtime.build_id, r.version, b.version
            ),
        )),
        (Some(_), Some(_)) => None,
        // Nothing measured says what an id that does not parse means: only a warning, as the
        // rule's `compares` says.
        _ => Some(Finding {
            evidence: Evidence::Read,
            ..Finding::new(
                Reason::BinaryNewerThanRuntime,
                format!(
                    "cannot compare the binary's build id {} with the runtime's {} (expected \
                     vMAJOR.MINOR.PATCH.BUILD); binary backend API {}, runtime backend API {}. A \
                     binary from a newer QAIRT than the runtime's does not load",
                    quoted(&binary.build_id),
                    quoted(&runtime.build_id),
                    binary.backend_api,
                    runtime.backend_api
                ),
            )
        }),
    }
}

/// The backend-id rule.
pub fn check_backend(binary: &BinaryInfo, runtime: &RuntimeSide) -> Option<Finding> {
    let (b, r) = (binary.backend_id, runtime.backend_id);
    (b != sys::QNN_BACKEND_ID_NULL && r != sys::QNN_BACKEND_ID_NULL && b != r).then(|| {
        Finding::new(
            Reason::WrongBackend,
            format!(
                "the binary was made for the {} backend, the runtime's library is the {} backend; \
             load it with the backend library it was compiled for, or compile it for this one",
                backend_name(b),
                backend_name(r)
            ),
        )
    })
}

/// The SoC rule (only when the device reports its SoC and the binary records one).
pub fn check_soc(binary: &BinaryInfo, device: Option<&DevicePlatform>) -> Option<Finding> {
    let b = binary.soc_model.filter(|&m| m != 0)?;
    let d = device?.soc_model.filter(|&m| m != 0)?;
    (b != d).then(|| {
        Finding::new(
            Reason::WrongSoc,
            format!(
            "the binary was compiled for SoC model {b}, the device is SoC model {d}; compile it \
             with soc_model {d} (QCS6490 is 35)"
        ),
        )
    })
}

/// The HTP-architecture rule (only when both sides say).
pub fn check_htp_arch(binary: &BinaryInfo, device: Option<&DevicePlatform>) -> Option<Finding> {
    let b = binary.dsp_arch.filter(|&a| a != 0)?;
    let d = device?.dsp_arch.filter(|&a| a != 0)?;
    (b != d).then(|| {
        Finding::new(
            Reason::WrongHtpArch,
            format!(
                "the binary was compiled for HTP v{b}, the device's HTP is v{d}; compile it with \
             htp_arch {d}"
            ),
        )
    })
}

/// The VTCM rule (only when both sides say).
pub fn check_vtcm(binary: &BinaryInfo, device: Option<&DevicePlatform>) -> Option<Finding> {
    let b = binary.vtcm_size.filter(|&v| v != 0)?;
    let d = device?.vtcm_size.filter(|&v| v != 0)?;
    (b > d).then(|| {
        Finding::new(
            Reason::InsufficientVtcm,
            format!(
                "the binary's graphs were compiled for {b} bytes of VTCM, the device has {d}; \
             compile it with vtcm_mb {} or less",
                d / (1024 * 1024)
            ),
        )
    })
}

/// Every rule over the binary's header against the runtime. Tensor formats and encodings are
/// checked as the metadata is read ([`check_data_format`](super::check_data_format), [`check_encoding`](super::check_encoding)).
pub fn check(binary: &BinaryInfo, runtime: &RuntimeSide, mode: Mode) -> Verdict {
    let mut verdict = Verdict::default();
    if mode == Mode::Off {
        return verdict;
    }
    let device = runtime.device.as_ref();
    let findings = [
        check_build_id(binary, runtime),
        check_backend(binary, runtime),
        check_soc(binary, device),
        check_htp_arch(binary, device),
        check_vtcm(binary, device),
    ];
    for finding in findings.into_iter().flatten() {
        let refuse = match finding.evidence {
            Evidence::Measured | Evidence::Own => true,
            Evidence::Read => mode == Mode::Strict,
        };
        if refuse {
            verdict.refusals.push(finding);
        } else {
            verdict.warnings.push(finding);
        }
    }
    verdict
}

/// What a runtime needs for `binary` to load, from the rules: `["QAIRT >= 2.51.0", "HTP
/// backend (id 6)", "SoC model 35", "HTP v68", "VTCM >= 4194304 bytes"]`.
pub fn requirements(binary: &BinaryInfo) -> Vec<String> {
    let mut out = Vec::new();
    match BuildId::parse(&binary.build_id) {
        Some(b) => out.push(format!("QAIRT >= {}", b.version)),
        None => out.push(format!(
            "a runtime whose build id is {} or of the same release (the build id does not parse)",
            quoted(&binary.build_id)
        )),
    }
    if binary.backend_id != sys::QNN_BACKEND_ID_NULL {
        out.push(format!("{} backend", backend_name(binary.backend_id)));
    }
    if let Some(soc) = binary.soc_model.filter(|&m| m != 0) {
        out.push(format!("SoC model {soc}"));
    }
    if let Some(arch) = binary.dsp_arch.filter(|&a| a != 0) {
        out.push(format!("HTP v{arch}"));
    }
    if let Some(vtcm) = binary.vtcm_size.filter(|&v| v != 0) {
        out.push(format!("VTCM >= {vtcm} bytes"));
    }
    out
}

/// The situation that trips each rule, for the tests: beside the header checks, so a new rule
/// is its `Reason` (in `base::preflight_rules`), its check and its situation here.
#[cfg(test)]
pub(super) mod situations {
    use super::*;
    use crate::base::preflight_rules::{check_data_format, check_encoding};

    pub const V247: &str = "v2.47.0.260601114230";
    pub const V251: &str = "v2.51.0.260929181845";

    pub fn runtime(build_id: &str) -> RuntimeSide {
        RuntimeSide {
            backend_id: 6,
            build_id: build_id.into(),
            core_api: Version::new(2, 36, 0),
            backend_api: Version::new(5, 47, 0),
            device: None,
        }
    }

    pub fn device(soc: Option<u32>, arch: Option<u32>) -> DevicePlatform {
        DevicePlatform {
            soc_model: soc,
            dsp_arch: arch,
            vtcm_size: None,
        }
    }

    /// The situation that trips `reason`'s rule, and what the verdict (or the tensor check) made of
    /// it. A match on every reason: a new one does not compile without its situation.
    pub fn tripped(reason: Reason) -> Vec<Finding> {
        let header =
            |binary: BinaryInfo, runtime: RuntimeSide| check(&binary, &runtime, Mode::Strict);
        let on_device = |device: DevicePlatform| RuntimeSide {
            device: Some(device),
            ..runtime(V251)
        };
        let verdict = match reason {
            Reason::BinaryNewerThanRuntime => header(BinaryInfo::for_tests(V251), runtime(V247)),
            Reason::WrongBackend => header(
                BinaryInfo {
                    backend_id: 4,
                    ..BinaryInfo::for_tests(V251)
                },
                runtime(V251),
            ),
            Reason::WrongSoc => header(
                BinaryInfo::for_tests(V251),
                on_device(device(Some(43), None)),
            ),
            Reason::WrongHtpArch => header(
                BinaryInfo::for_tests(V251),
                on_device(device(None, Some(73))),
            ),
            Reason::InsufficientVtcm => header(
                BinaryInfo::for_tests(V251),
                on_device(DevicePlatform {
                    vtcm_size: Some(2 * 1024 * 1024),
                    ..DevicePlatform::default()
                }),
            ),
            Reason::UnsupportedTensorFormat => {
                return check_data_format(1, "input x").err().into_iter().collect();
            }
            Reason::UnsupportedEncoding => {
                return check_encoding(12, "output y").err().into_iter().collect();
            }
        };
        assert!(verdict.warnings.is_empty(), "{reason}: {verdict:?}");
        verdict.refusals
    }
}
