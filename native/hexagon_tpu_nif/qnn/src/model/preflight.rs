//! The pre-flight verdict: whether a context binary can load on a runtime, decided from what
//! QnnSystem reads ([`BinaryInfo`](crate::model::metadata::BinaryInfo)) and what the backend reports
//! ([`RuntimeSide`]), before `contextCreateFromBinary` is asked.
//!
//! Every rule is a pure function here, so `cargo test` covers each with a table of cases. A
//! rule's [`Evidence`] decides what a mismatch does: a **measured** rule (seen failing on
//! Qualcomm's libraries) refuses the load with a typed error; a rule only **read** in Qualcomm's
//! headers or documentation is a warning (a refusal only in [`Mode::Strict`]); the package's
//! **own** limits (tensor layouts it cannot size) refuse always, whatever the mode, because a
//! tensor of unknown layout would be mis-sized.
//!
//! `base::preflight_rules` states each rule once ([`Reason::rule`]: `qnn::error` and tensor
//! reading need the rules, so they sit in the lowest layer); `verdict` judges a binary's header
//! against a runtime. The table in `docs/preflight.md` is rendered from [`Reason::rule`], and a
//! test fails when the two differ (`HEXAGON_TPU_BLESS=1 cargo test -p qnn --lib preflight`
//! rewrites it).

pub(crate) mod verdict;

pub use crate::base::preflight_rules::{
    EncodingSupport, Evidence, Finding, Reason, Rule, check_data_format, check_encoding,
};
pub use crate::ffi::platform::DevicePlatform;
pub use verdict::{
    BuildId, Mode, PLATFORM_IS_HARDWARE, RuntimeSide, Verdict, check, check_backend,
    check_build_id, check_htp_arch, check_soc, check_vtcm, requirements,
};

#[cfg(test)]
mod tests;
