//! API versions as QNN reports them.

use std::fmt;

use crate::sys::Qnn_Version_t;

/// A QNN API version (`major.minor.patch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }
}

impl From<Qnn_Version_t> for Version {
    fn from(v: Qnn_Version_t) -> Self {
        Version::new(v.major, v.minor, v.patch)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}
