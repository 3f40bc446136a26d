//! The rules themselves: each [`Reason`], what its rule compares and how it is known
//! ([`Reason::rule`], the one place a rule's facts are stated), the [`Finding`] a mismatch
//! becomes, and the two rules judged as tensor metadata is read ([`check_data_format`],
//! [`check_encoding`]). Nothing here reads a binary or a runtime, so the metadata reader can use
//! it without a cycle.

use std::fmt;

use crate::sys;

/// Declares [`Reason`] and [`Reason::ALL`] from one list, so no reason can be left out of `ALL`
/// (and so out of the docs table and the tests that walk it).
macro_rules! reasons {
    ($($(#[doc = $doc:literal])* $variant:ident => $atom:literal,)*) => {
        /// Why a binary does not fit a runtime: the `reason` of the error (or warning).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Reason {
            /// Every reason, in the order the verdict checks them.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant),*];

            /// The reason atom's name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => $atom,)*
                }
            }
        }
    };
}

reasons! {
    /// The binary was made by a newer QAIRT than the runtime's.
    BinaryNewerThanRuntime => "binary_newer_than_runtime",
    /// The binary was made for another backend.
    WrongBackend => "wrong_backend",
    /// The binary was made for another SoC than the device's.
    WrongSoc => "wrong_soc",
    /// The binary was made for another HTP (DSP) architecture than the device's.
    WrongHtpArch => "wrong_htp_arch",
    /// The binary's graphs ask for more VTCM than the device has.
    InsufficientVtcm => "insufficient_vtcm",
    /// An input or output tensor has a data format this package cannot size (not dense).
    UnsupportedTensorFormat => "unsupported_tensor_format",
    /// An input or output tensor has a quantization encoding unknown to this package.
    UnsupportedEncoding => "unsupported_encoding",
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

/// One rule of the verdict, as `docs/preflight.md` lists it (its table is rendered from these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub evidence: Evidence,
    /// What is compared.
    pub compares: &'static str,
    /// Where the rule comes from.
    pub source: &'static str,
}

impl Reason {
    /// This reason's rule. Every check takes its [`Evidence`] from here.
    pub const fn rule(self) -> Rule {
        let (evidence, compares, source) = match self {
            Reason::BinaryNewerThanRuntime => (
                Evidence::Measured,
                "the binary's build id against the backend's (`vMAJOR.MINOR.PATCH.BUILD`, \
                 compared on major.minor.patch); an unparseable id on either side is a warning",
                "QAIRT 2.47.0, 2.48.40, 2.49.40, 2.50.40 and 2.51.0 x86 HTP emulators \
                 (onnxruntime-qnn 2.3.0-2.7.0), every pairing: a newer binary fails with 5000 \
                 (`Using newer context binary on old SDK`; the aarch64 libraries may answer \
                 5004), an older one loads. The rule follows the SDK version, not the blob: \
                 2.49.40 binaries fail on 2.48.40, both context blob 4.0.4",
            ),
            Reason::WrongBackend => (
                Evidence::Read,
                "the binary's backend id against the backend library's (0 = unset, not checked)",
                "QNN headers: a context binary is made by and for one backend (QnnContext.h, \
                 QnnSystemContext.h `backendId`)",
            ),
            Reason::WrongSoc => (
                Evidence::Read,
                "the binary's `socModel` (BinaryInfo v3; 0 = unset) against the device's \
                 (platform info), when the backend reports one; judged on aarch64 only",
                "QNN headers: QNN_CONTEXT_ERROR_BINARY_CONFIGURATION (5008), \"binary built for \
                 another SoC\"; the x86 emulator reports SoC model 30 and loads SoC 35 binaries \
                 (measured, QAIRT 2.47 and 2.51), so it does not enforce the SoC",
            ),
            Reason::WrongHtpArch => (
                Evidence::Read,
                "the binary's DSP arch (HTP context metadata) against the device's (platform \
                 info), when the backend reports one; judged on aarch64 only",
                "QNN headers (5008, as for the SoC); the x86 emulator loads v73/v75 binaries \
                 (measured), so it does not enforce the arch",
            ),
            Reason::InsufficientVtcm => (
                Evidence::Read,
                "the VTCM the binary's graphs were compiled for (the largest; HTP graph blob \
                 info) against the device's (platform info, MB), when both say; judged on \
                 aarch64 only",
                "HTP/QnnHtpDevice.h `vtcmSize`: \"user could not request VTCM size exceed this \
                 value\"",
            ),
            Reason::UnsupportedTensorFormat => (
                Evidence::Own,
                "every graph input and output's `dataFormat`: only dense (0) is sized here",
                "QnnTypes.h data formats (sparse, codebook, MX, UBWC, HMX weight layout) store \
                 other byte counts than the dims say",
            ),
            Reason::UnsupportedEncoding => (
                Evidence::Own,
                "every graph input and output's quantization encoding: 0-3 converted, 4-11 \
                 passed raw, UNDEFINED not quantized; any other is refused",
                "QnnTypes.h `Qnn_QuantizationEncoding_t` up to QAIRT 2.43",
            ),
        };
        Rule {
            evidence,
            compares,
            source,
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

impl Finding {
    /// A mismatch of `reason`'s rule, known as the rule is.
    pub fn new(reason: Reason, message: String) -> Finding {
        Finding {
            reason,
            evidence: reason.rule().evidence,
            message,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
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
    Err(Finding::new(
        Reason::UnsupportedTensorFormat,
        format!(
            "{what} uses data format {data_format} ({name}); hexagon_tpu sizes only dense \
             tensors (format 0). Compile the model with dense graph inputs and outputs"
        ),
    ))
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
            return Err(Finding::new(
                Reason::UnsupportedEncoding,
                format!(
                    "{what} has quantization encoding {other}, unknown to hexagon_tpu (it knows \
                     0-11, QAIRT 2.43's); the tensor's layout cannot be trusted. Compile the model \
                     with scale/offset quantized or float graph inputs and outputs"
                ),
            ));
        }
    })
}
