//! The pre-flight verdict: whether a context binary can load on a runtime, decided from what
//! QnnSystem reads ([`BinaryInfo`]) and what the backend reports ([`RuntimeSide`]), before
//! `contextCreateFromBinary` is asked.
//!
//! Every rule is a pure function here, so `cargo test` covers each with a table of cases. A
//! rule's [`Evidence`] decides what a mismatch does: a **measured** rule (seen failing on
//! Qualcomm's libraries) refuses the load with a typed error; a rule only **read** in Qualcomm's
//! headers or documentation is a warning (a refusal only in [`Mode::Strict`]); the package's
//! **own** limits (tensor layouts it cannot size) refuse always, whatever the mode, because a
//! tensor of unknown layout would be mis-sized. `docs/preflight.md` holds the same table.

use std::fmt;

use crate::metadata::BinaryInfo;
use crate::sys;
use crate::version::Version;

/// Why a binary does not fit a runtime: the `reason` of the error (or warning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The binary was made by a newer QAIRT than the runtime's.
    BinaryNewerThanRuntime,
    /// The binary was made for another backend.
    WrongBackend,
    /// The binary was made for another SoC than the device's.
    WrongSoc,
    /// The binary was made for another HTP (DSP) architecture than the device's.
    WrongHtpArch,
    /// The binary's graphs ask for more VTCM than the device has.
    InsufficientVtcm,
    /// An input or output tensor has a data format this package cannot size (not dense).
    UnsupportedTensorFormat,
    /// An input or output tensor has a quantization encoding unknown to this package.
    UnsupportedEncoding,
}

impl Reason {
    /// The reason atom's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BinaryNewerThanRuntime => "binary_newer_than_runtime",
            Reason::WrongBackend => "wrong_backend",
            Reason::WrongSoc => "wrong_soc",
            Reason::WrongHtpArch => "wrong_htp_arch",
            Reason::InsufficientVtcm => "insufficient_vtcm",
            Reason::UnsupportedTensorFormat => "unsupported_tensor_format",
            Reason::UnsupportedEncoding => "unsupported_encoding",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a rule is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// Seen on Qualcomm's libraries: a mismatch refuses the load.
    Measured,
    /// Read in Qualcomm's headers or documentation, never seen failing: a warning.
    Read,
    /// This package's own limit: always refused.
    Own,
}

impl Evidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Measured => "measured",
            Evidence::Read => "read",
            Evidence::Own => "own",
        }
    }
}

/// One rule of the verdict, as the docs list it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub reason: Reason,
    pub evidence: Evidence,
    /// What is compared.
    pub compares: &'static str,
    /// Where the rule comes from.
    pub source: &'static str,
}

/// Every rule, in the order they are checked.
pub const RULES: [Rule; 7] = [
    Rule {
        reason: Reason::BinaryNewerThanRuntime,
        evidence: Evidence::Measured,
        compares: "the binary's build id against the backend's (vMAJOR.MINOR.PATCH.BUILD, \
                   compared on major.minor.patch); an unparseable id on either side is a warning",
        source: "QAIRT 2.47.0-2.51.0 x86 HTP emulators: a newer binary fails with 5000 \
                 (`Using newer context binary on old SDK`), an older one loads; a 2.49.40 binary \
                 fails on 2.48.40 with the same context blob version 4.0.4",
    },
    Rule {
        reason: Reason::WrongBackend,
        evidence: Evidence::Read,
        compares: "the binary's backend id against the backend library's (0 = unset, not checked)",
        source: "QNN headers: a context binary is made by and for one backend (QnnContext.h, \
                 QnnSystemContext.h `backendId`)",
    },
    Rule {
        reason: Reason::WrongSoc,
        evidence: Evidence::Read,
        compares: "the binary's socModel (BinaryInfo v3; 0 = unset) against the device's \
                   (platform info), when the backend reports one",
        source: "QNN headers: QNN_CONTEXT_ERROR_BINARY_CONFIGURATION (5008) \"binary built for \
                 another SoC\"; the x86 emulator reports SoC model 30 and loads SoC 35 \
                 binaries (measured), so it does not enforce the SoC",
    },
    Rule {
        reason: Reason::WrongHtpArch,
        evidence: Evidence::Read,
        compares: "the binary's DSP arch (context metadata) against the device's (platform \
                   info), when the backend reports one",
        source: "QNN headers (5008); the x86 emulator loads v73/v75 binaries, so it does not \
                 enforce the arch",
    },
    Rule {
        reason: Reason::InsufficientVtcm,
        evidence: Evidence::Read,
        compares: "the VTCM the binary's graphs were compiled for (the largest, HTP graph blob \
                   info) against the device's (platform info, MB), when both say",
        source: "HTP/QnnHtpDevice.h `vtcmSize`: \"user could not request VTCM size exceed this \
                 value\"",
    },
    Rule {
        reason: Reason::UnsupportedTensorFormat,
        evidence: Evidence::Own,
        compares: "every graph input and output's dataFormat: only DENSE (0) is sized here",
        source: "QnnTypes.h data formats (sparse, codebook, MX, UBWC, HMX weight layout) store \
                 other byte counts than the dims say",
    },
    Rule {
        reason: Reason::UnsupportedEncoding,
        evidence: Evidence::Own,
        compares: "every graph input and output's quantization encoding: 0-11 and UNDEFINED \
                   are known (0-3 converted, 4-11 passed raw); any other is refused",
        source: "QnnTypes.h Qnn_QuantizationEncoding_t up to QAIRT 2.43",
    },
];

/// The rule for `reason`.
pub fn rule(reason: Reason) -> &'static Rule {
    RULES
        .iter()
        .find(|r| r.reason == reason)
        .unwrap_or(&RULES[0])
}

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

/// What the device reports about itself (`deviceGetPlatformInfo`); every field optional.
/// `vtcm_size` is in bytes (the device reports MB).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevicePlatform {
    pub soc_model: Option<u32>,
    pub dsp_arch: Option<u32>,
    pub vtcm_size: Option<u64>,
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

/// Whether a backend's platform info describes the hardware a binary will run on. Qualcomm's HTP
/// library for x86_64 is the emulator: it reports a default device (SoC model 30, v68, 4 MB of
/// VTCM; measured on QAIRT 2.47 and 2.51) whatever the binary was made for, and loads binaries made
/// for other SoCs and arches. HTP hardware is reached from aarch64 only.
pub const PLATFORM_IS_HARDWARE: bool = cfg!(target_arch = "aarch64");

impl From<&crate::runtime::RuntimeInfo> for RuntimeSide {
    /// The runtime as the verdict sees it: its device only where [`PLATFORM_IS_HARDWARE`].
    fn from(info: &crate::runtime::RuntimeInfo) -> Self {
        RuntimeSide {
            backend_id: info.backend_id,
            build_id: info.build_id.clone(),
            core_api: info.core_api,
            backend_api: info.backend_api,
            device: info.device.clone().filter(|_| PLATFORM_IS_HARDWARE),
        }
    }
}

/// One mismatch: its reason, how the rule is known, and a message naming both sides and the
/// remedy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub reason: Reason,
    pub evidence: Evidence,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

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
    let finding = |evidence, message| {
        Some(Finding {
            reason: Reason::BinaryNewerThanRuntime,
            evidence,
            message,
        })
    };
    match (
        BuildId::parse(&binary.build_id),
        BuildId::parse(&runtime.build_id),
    ) {
        (Some(b), Some(r)) if b.version > r.version => finding(
            Evidence::Measured,
            format!(
                "the binary was made by QAIRT {} (build id {:?}), newer than the runtime's QAIRT {} \
                 (build id {:?}); QNN refuses a binary from a newer QAIRT. Compile the model with \
                 QAIRT {} or older, or install the QAIRT {} runtime (or newer) on the device",
                b.version, binary.build_id, r.version, runtime.build_id, r.version, b.version
            ),
        ),
        (Some(_), Some(_)) => None,
        _ => finding(
            Evidence::Read,
            format!(
                "cannot compare the binary's build id {} with the runtime's {} (expected \
                 vMAJOR.MINOR.PATCH.BUILD); binary backend API {}, runtime backend API {}. A \
                 binary from a newer QAIRT than the runtime's does not load",
                quoted(&binary.build_id),
                quoted(&runtime.build_id),
                binary.backend_api,
                runtime.backend_api
            ),
        ),
    }
}

/// The backend-id rule.
pub fn check_backend(binary: &BinaryInfo, runtime: &RuntimeSide) -> Option<Finding> {
    let (b, r) = (binary.backend_id, runtime.backend_id);
    (b != sys::QNN_BACKEND_ID_NULL && r != sys::QNN_BACKEND_ID_NULL && b != r).then(|| Finding {
        reason: Reason::WrongBackend,
        evidence: Evidence::Read,
        message: format!(
            "the binary was made for the {} backend, the runtime's library is the {} backend; \
             load it with the backend library it was compiled for, or compile it for this one",
            backend_name(b),
            backend_name(r)
        ),
    })
}

/// The SoC rule (only when the device reports its SoC and the binary records one).
pub fn check_soc(binary: &BinaryInfo, device: Option<&DevicePlatform>) -> Option<Finding> {
    let b = binary.soc_model.filter(|&m| m != 0)?;
    let d = device?.soc_model.filter(|&m| m != 0)?;
    (b != d).then(|| Finding {
        reason: Reason::WrongSoc,
        evidence: Evidence::Read,
        message: format!(
            "the binary was compiled for SoC model {b}, the device is SoC model {d}; compile it \
             with soc_model {d} (QCS6490 is 35)"
        ),
    })
}

/// The HTP-architecture rule (only when both sides say).
pub fn check_htp_arch(binary: &BinaryInfo, device: Option<&DevicePlatform>) -> Option<Finding> {
    let b = binary.dsp_arch.filter(|&a| a != 0)?;
    let d = device?.dsp_arch.filter(|&a| a != 0)?;
    (b != d).then(|| Finding {
        reason: Reason::WrongHtpArch,
        evidence: Evidence::Read,
        message: format!(
            "the binary was compiled for HTP v{b}, the device's HTP is v{d}; compile it with \
             htp_arch {d}"
        ),
    })
}

/// The VTCM rule (only when both sides say).
pub fn check_vtcm(binary: &BinaryInfo, device: Option<&DevicePlatform>) -> Option<Finding> {
    let b = binary.vtcm_size.filter(|&v| v != 0)?;
    let d = device?.vtcm_size.filter(|&v| v != 0)?;
    (b > d).then(|| Finding {
        reason: Reason::InsufficientVtcm,
        evidence: Evidence::Read,
        message: format!(
            "the binary's graphs were compiled for {b} bytes of VTCM, the device has {d}; \
             compile it with vtcm_mb {} or less",
            d / (1024 * 1024)
        ),
    })
}

/// Every rule over the binary's header against the runtime. Tensor formats and encodings are
/// checked as the metadata is read ([`check_data_format`], [`check_encoding`]).
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

/// The data-format rule for one graph input or output (`what` names it).
pub fn check_data_format(data_format: u32, what: &str) -> Result<(), Finding> {
    if data_format == sys::QNN_TENSOR_DATA_FORMAT_DENSE {
        return Ok(());
    }
    let name = match data_format {
        1 => "sparse",
        2 => "codebook",
        3 => "MX",
        4..=7 | 9..=11 => "UBWC",
        8 => "HMX weight layout",
        _ => "unknown",
    };
    Err(Finding {
        reason: Reason::UnsupportedTensorFormat,
        evidence: Evidence::Own,
        message: format!(
            "{what} uses data format {data_format} ({name}); hexagon_tpu sizes only dense \
             tensors (format 0). Compile the model with dense graph inputs and outputs"
        ),
    })
}

/// What the package does with a quantization encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodingSupport {
    /// Not quantized (`UNDEFINED`, or an encoding marked not defined).
    None,
    /// Scale/offset per tensor or per axis (with or without a bit width): converted.
    Converted,
    /// Known but not converted: data passes in the model's own dtype.
    Raw(&'static str),
}

/// The encoding rule for one graph input or output.
pub fn check_encoding(encoding: u32, what: &str) -> Result<EncodingSupport, Finding> {
    Ok(match encoding {
        sys::QNN_QUANTIZATION_ENCODING_SCALE_OFFSET
        | sys::QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET
        | sys::QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET
        | sys::QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET => EncodingSupport::Converted,
        sys::QNN_QUANTIZATION_ENCODING_BLOCK => EncodingSupport::Raw("block"),
        sys::QNN_QUANTIZATION_ENCODING_BLOCKWISE_EXPANSION => {
            EncodingSupport::Raw("blockwise_expansion")
        }
        sys::QNN_QUANTIZATION_ENCODING_VECTOR => EncodingSupport::Raw("vector"),
        sys::QNN_QUANTIZATION_ENCODING_FLOAT_BLOCK => EncodingSupport::Raw("float_block"),
        sys::QNN_QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET_MAPPED => {
            EncodingSupport::Raw("bw_axis_scale_offset_mapped")
        }
        sys::QNN_QUANTIZATION_ENCODING_BW_BLOCK_MAPPED => EncodingSupport::Raw("bw_block_mapped"),
        sys::QNN_QUANTIZATION_ENCODING_BW_BLOCKWISE_EXPANSION_MAPPED => {
            EncodingSupport::Raw("bw_blockwise_expansion_mapped")
        }
        sys::QNN_QUANTIZATION_ENCODING_BW_FLOAT_BLOCK => EncodingSupport::Raw("bw_float_block"),
        sys::QNN_QUANTIZATION_ENCODING_UNDEFINED => EncodingSupport::None,
        other => {
            return Err(Finding {
                reason: Reason::UnsupportedEncoding,
                evidence: Evidence::Own,
                message: format!(
                    "{what} has quantization encoding {other}, unknown to hexagon_tpu (it knows \
                     0-11, QAIRT 2.43's); the tensor's layout cannot be trusted. Compile the model \
                     with scale/offset quantized or float graph inputs and outputs"
                ),
            });
        }
    })
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

#[cfg(test)]
mod tests;
