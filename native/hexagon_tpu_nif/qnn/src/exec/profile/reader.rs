//! Walking a profile's events through QNN's pointers (the `unsafe` part of profiling), with
//! limits on how many and how deep.

use std::ffi::{CStr, c_char};

use crate::base::error::{Error, Result};
use crate::ffi::calls::profile::EventIds;
use crate::ffi::loader::BackendLibrary;
use crate::sys;

use super::types::*;

/// The most events read from one profile, and the deepest nesting: a backend's answer beyond
/// them is refused rather than followed.
const MAX_EVENTS: usize = 1 << 16;
const MAX_DEPTH: usize = 8;
/// Identifiers longer than this are cut.
const MAX_IDENTIFIER: usize = 1024;

/// # Safety
/// `ids` must point to `count` ids (or `count` be 0).
pub(super) unsafe fn id_slice<'a>(
    (ids, count): EventIds,
    op: &str,
) -> Result<&'a [sys::QnnProfile_EventId_t]> {
    if count == 0 {
        return Ok(&[]);
    }
    if ids.is_null() || count as usize > MAX_EVENTS {
        return Err(Error::Internal {
            message: format!("{op} returned {count} events at {ids:?}"),
        });
    }
    // SAFETY: the caller's contract, checked non-NULL above.
    Ok(unsafe { std::slice::from_raw_parts(ids, count as usize) })
}

pub(super) struct Reader<'a> {
    pub(super) lib: &'a BackendLibrary,
    pub(super) extended: bool,
    pub(super) events: usize,
}

impl Reader<'_> {
    pub(super) fn event(&mut self, id: sys::QnnProfile_EventId_t, depth: usize) -> Result<Event> {
        self.events += 1;
        if self.events > MAX_EVENTS || depth > MAX_DEPTH {
            return Err(Error::Internal {
                message: format!(
                    "the profile has more than {MAX_EVENTS} events or is nested deeper than \
                     {MAX_DEPTH}"
                ),
            });
        }
        let mut event = self.data(id)?;
        // SAFETY: `id` is an event of a live handle.
        let subs = unsafe { self.lib.profile_sub_events(id)? };
        // SAFETY: QNN answered with ids valid until the handle is freed.
        let subs = unsafe { id_slice(subs, "profileGetSubEvents")? };
        event.sub_events = subs
            .iter()
            .map(|&sub| self.event(sub, depth + 1))
            .collect::<Result<Vec<_>>>()?;
        Ok(event)
    }

    fn data(&self, id: sys::QnnProfile_EventId_t) -> Result<Event> {
        // SAFETY: `id` is an event of a live handle.
        let extended = self
            .extended
            .then(|| unsafe { self.lib.profile_extended_event_data(id) });
        if let Some(Some(data)) = extended {
            let data = data?;
            if data.version == sys::QNN_PROFILE_DATA_VERSION_1 {
                let v1 = data.v1;
                let unit = Unit::from_raw(v1.unit);
                let value = match unit {
                    // SAFETY: OBJECT events hold the opaque object.
                    Unit::Object => unsafe { v1.data.backendOpaqueObject.opaqueObject.len },
                    // SAFETY: every other unit holds the scalar.
                    _ => scalar_u64(unsafe { v1.data.value }),
                };
                return Ok(Event {
                    kind: v1.type_,
                    unit,
                    value,
                    // SAFETY: NULL or a string of the live handle.
                    identifier: unsafe { identifier(v1.identifier) },
                    timestamp_us: Some(v1.timestamp),
                    sub_events: Vec::new(),
                });
            }
        }
        // SAFETY: as above.
        let data = unsafe { self.lib.profile_event_data(id)? };
        Ok(Event {
            kind: data.type_,
            unit: Unit::from_raw(data.unit),
            value: data.value,
            // SAFETY: NULL or a string of the live handle.
            identifier: unsafe { identifier(data.identifier) },
            timestamp_us: None,
            sub_events: Vec::new(),
        })
    }
}

/// A scalar's value as an integer (floats truncated, negatives as 0).
fn scalar_u64(scalar: sys::Qnn_Scalar_t) -> u64 {
    // SAFETY: each arm reads the member `dataType` names.
    unsafe {
        match scalar.dataType {
            sys::QNN_DATATYPE_UINT_64 => scalar.value.uint64Value,
            sys::QNN_DATATYPE_INT_64 => scalar.value.int64Value.max(0) as u64,
            sys::QNN_DATATYPE_UINT_32 => u64::from(scalar.value.uint32Value),
            sys::QNN_DATATYPE_INT_32 => scalar.value.int32Value.max(0) as u64,
            sys::QNN_DATATYPE_UINT_16 => u64::from(scalar.value.uint16Value),
            sys::QNN_DATATYPE_INT_16 => scalar.value.int16Value.max(0) as u64,
            sys::QNN_DATATYPE_UINT_8 | sys::QNN_DATATYPE_BOOL_8 => {
                u64::from(scalar.value.uint8Value)
            }
            sys::QNN_DATATYPE_INT_8 => scalar.value.int8Value.max(0) as u64,
            sys::QNN_DATATYPE_FLOAT_32 => scalar.value.floatValue.max(0.0) as u64,
            sys::QNN_DATATYPE_FLOAT_64 => scalar.value.doubleValue.max(0.0) as u64,
            _ => scalar.value.uint64Value,
        }
    }
}

/// # Safety
/// `text` must be NULL or a NUL-terminated string.
unsafe fn identifier(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { CStr::from_ptr(text) }.to_bytes();
    String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_IDENTIFIER)]).into_owned()
}
