//! `graphExecute` and `graphExecuteAsync`. Unlike the other calls, they are made under the
//! caller's permit and return QNN's raw status: `exec::graph::ExecuteCall` holds the permit
//! across the submission's accounting and counts the execute before it checks the answer
//! (whose text it asks of this library).

use std::ffi::c_void;

use crate::base::error::{Error, Result};
use crate::base::exit::InQnn;
use crate::ffi::loader::BackendLibrary;
use crate::sys;

/// The tensors of one execute as QNN takes them: an array it reads (inputs) and one it writes
/// (outputs), each tensor pointing at its client buffer.
pub(crate) struct TensorArrays {
    pub(crate) inputs: *const sys::Qnn_Tensor_t,
    pub(crate) num_inputs: u32,
    pub(crate) outputs: *mut sys::Qnn_Tensor_t,
    pub(crate) num_outputs: u32,
}

impl BackendLibrary {
    /// `graphExecute`, synchronous: QNN's status, unchecked.
    ///
    /// # Safety
    /// `graph` is a live graph handle of this library whose context is kept from being freed
    /// during the call, and no other execute of it runs meanwhile. `tensors` describe buffers of
    /// the graph's tensor sizes that outlive the call, the outputs borrowed exclusively.
    /// `profile` is NULL or a live profile handle of this library attached to no other call.
    pub(crate) unsafe fn graph_execute(
        &self,
        _in_qnn: &InQnn,
        graph: sys::Qnn_GraphHandle_t,
        tensors: TensorArrays,
        profile: sys::Qnn_ProfileHandle_t,
    ) -> sys::Status {
        // SAFETY: the caller's contract; a NULL signal asks for no timeout.
        sys::Status(unsafe {
            (self.fns.graph_execute)(
                graph,
                tensors.inputs,
                tensors.num_inputs,
                tensors.outputs,
                tensors.num_outputs,
                profile,
                std::ptr::null_mut(),
            )
        })
    }

    /// `graphExecuteAsync`: queues the execute in the backend's queue (blocking while it is
    /// full); QNN calls `notify` with `param` when it has run, unless the status returned
    /// here is a failure. An error when the library has no such entry (nothing was queued).
    ///
    /// # Safety
    /// As [`BackendLibrary::graph_execute`], except that the tensor arrays and their buffers
    /// must stay valid, unmoved and otherwise untouched until `notify` is called (they may be
    /// freed by `notify` before this returns), and that `notify` must accept `param`.
    pub(crate) unsafe fn graph_execute_async(
        &self,
        _in_qnn: &InQnn,
        graph: sys::Qnn_GraphHandle_t,
        tensors: TensorArrays,
        notify: sys::Qnn_NotifyFn_t,
        param: *mut c_void,
    ) -> Result<sys::Status> {
        let execute_async = self
            .fns
            .graph_execute_async
            .ok_or_else(|| Error::Internal {
                message: "the backend has no graphExecuteAsync".into(),
            })?;
        // SAFETY: the caller's contract; no profile and no signal.
        Ok(sys::Status(unsafe {
            execute_async(
                graph,
                tensors.inputs,
                tensors.num_inputs,
                tensors.outputs,
                tensors.num_outputs,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                Some(notify),
                param,
            )
        }))
    }
}
