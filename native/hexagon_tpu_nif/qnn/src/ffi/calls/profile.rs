//! The backend library's QnnProfile calls: a profile handle's life and the walk over its events.

use crate::base::error::{Error, Result};
use crate::ffi::loader::{BackendLibrary, ProfileFns};
use crate::sys;

/// Event ids as QNN answers them: `count` ids at the pointer, valid until the handle is freed.
pub(crate) type EventIds = (*const sys::QnnProfile_EventId_t, u32);

impl BackendLibrary {
    fn profile_fns(&self) -> Result<ProfileFns> {
        self.fns.profile.ok_or_else(|| Error::InvalidInput {
            message: format!(
                "profile: the backend {} has no QnnProfile functions",
                self.path.display()
            ),
        })
    }

    /// `Ok` when the library has every QnnProfile function the runtime needs; else the error
    /// that names the backend.
    pub(crate) fn can_profile(&self) -> Result<()> {
        self.profile_fns().map(|_| ())
    }

    /// Whether events are read with `profileGetExtendedEventData` (the library has it and says
    /// it supports extended events).
    pub(crate) fn has_extended_profile_events(&self) -> bool {
        self.fns
            .profile
            .is_some_and(|fns| fns.get_extended_event_data.is_some())
            && self.has_capability(sys::QNN_PROPERTY_PROFILE_SUPPORTS_EXTENDED_EVENT)
    }

    /// `profileCreate` at `level`; never a NULL handle.
    ///
    /// # Safety
    /// `backend` is a live backend handle of this library, on the thread that created it.
    pub(crate) unsafe fn profile_create(
        &self,
        backend: sys::Qnn_BackendHandle_t,
        level: sys::QnnProfile_Level_t,
    ) -> Result<sys::Qnn_ProfileHandle_t> {
        let fns = self.profile_fns()?;
        let mut handle: sys::Qnn_ProfileHandle_t = std::ptr::null_mut();
        self.checked("profileCreate", || {
            // SAFETY: the backend per the caller's contract; the out-pointer is writable.
            unsafe { (fns.create)(backend, level, &mut handle) }
        })?;
        if handle.is_null() {
            return Err(Error::Internal {
                message: "profileCreate returned a NULL handle".into(),
            });
        }
        Ok(handle)
    }

    /// `profileSetConfig` enabling optrace, or `None` when the library lacks the entry.
    ///
    /// # Safety
    /// `profile` is a live profile handle of this library, attached to no call.
    pub(crate) unsafe fn profile_enable_optrace(
        &self,
        profile: sys::Qnn_ProfileHandle_t,
    ) -> Option<Result<()>> {
        let set_config = self.fns.profile?.set_config?;
        let config = sys::QnnProfile_Config_t {
            option: sys::QNN_PROFILE_CONFIG_OPTION_ENABLE_OPTRACE,
            value: sys::QnnProfile_ConfigValue_t { enableOptrace: 1 },
        };
        let list = [&raw const config, std::ptr::null()];
        Some(self.checked("profileSetConfig (enableOptrace)", || {
            // SAFETY: the handle per the caller's contract; a NULL-terminated list of one config
            // that outlives the call.
            unsafe { set_config(profile, list.as_ptr()) }
        }))
    }

    /// `profileFree`.
    ///
    /// # Safety
    /// `profile` came from this library's profileCreate on this thread, is attached to no call,
    /// and is not used after this call (nor are its events).
    pub(crate) unsafe fn profile_free(&self, profile: sys::Qnn_ProfileHandle_t) -> Result<()> {
        let fns = self.profile_fns()?;
        // SAFETY: the caller's contract: an idle handle of this library, freed once.
        self.checked("profileFree", || unsafe { (fns.free)(profile) })
    }

    /// `profileGetEvents`: the top-level events of the last call the handle was attached to.
    ///
    /// # Safety
    /// `profile` is a live profile handle of this library that no call is using.
    pub(crate) unsafe fn profile_events(
        &self,
        profile: sys::Qnn_ProfileHandle_t,
    ) -> Result<EventIds> {
        let fns = self.profile_fns()?;
        let (mut ids, mut count) = (std::ptr::null(), 0u32);
        self.checked("profileGetEvents", || {
            // SAFETY: the handle per the caller's contract; both out-pointers are writable.
            unsafe { (fns.get_events)(profile, &mut ids, &mut count) }
        })?;
        Ok((ids, count))
    }

    /// `profileGetSubEvents`.
    ///
    /// # Safety
    /// `event` is an event of a live profile handle of this library.
    pub(crate) unsafe fn profile_sub_events(
        &self,
        event: sys::QnnProfile_EventId_t,
    ) -> Result<EventIds> {
        let fns = self.profile_fns()?;
        let (mut ids, mut count) = (std::ptr::null(), 0u32);
        self.checked("profileGetSubEvents", || {
            // SAFETY: the event per the caller's contract; both out-pointers are writable.
            unsafe { (fns.get_sub_events)(event, &mut ids, &mut count) }
        })?;
        Ok((ids, count))
    }

    /// `profileGetEventData`. Its identifier points into the handle.
    ///
    /// # Safety
    /// `event` is an event of a live profile handle of this library.
    pub(crate) unsafe fn profile_event_data(
        &self,
        event: sys::QnnProfile_EventId_t,
    ) -> Result<sys::QnnProfile_EventData_t> {
        let fns = self.profile_fns()?;
        let mut data = sys::QnnProfile_EventData_t::default();
        self.checked("profileGetEventData", || {
            // SAFETY: the event per the caller's contract; `data` is writable.
            unsafe { (fns.get_event_data)(event, &mut data) }
        })?;
        Ok(data)
    }

    /// `profileGetExtendedEventData`, or `None` when the library lacks the entry. Its
    /// identifier points into the handle.
    ///
    /// # Safety
    /// `event` is an event of a live profile handle of this library.
    pub(crate) unsafe fn profile_extended_event_data(
        &self,
        event: sys::QnnProfile_EventId_t,
    ) -> Option<Result<sys::QnnProfile_ExtendedEventData_t>> {
        let get = self.fns.profile?.get_extended_event_data?;
        let mut data = sys::QnnProfile_ExtendedEventData_t::zeroed();
        Some(
            self.checked("profileGetExtendedEventData", || {
                // SAFETY: the event per the caller's contract; `data` is writable.
                unsafe { get(event, &mut data) }
            })
            .map(|()| data),
        )
    }
}
