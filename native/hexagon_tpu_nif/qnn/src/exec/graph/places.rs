//! Where an execute's tensors are ([`Place`]: a client buffer, or a shared buffer of the
//! graph's pool) and the tensors QNN is given for them ([`AsyncTensors`]). The tensors are made
//! after each `ExecuteCall::begin`, in the context handle that call uses, so an execute retried
//! after a recovery registers its shared buffers again in the new handle.

use super::Turn;
use crate::base::error::Result;
use crate::exec::context::OwnedHandleUse;
use crate::exec::shared::SharedBuffer;
use crate::ffi::calls::execute::TensorArrays;
use crate::model::tensor::TensorTemplate;
use crate::observe::counters;
use crate::sys;

/// Where one tensor's bytes are for an execute.
#[derive(Clone, Copy)]
pub(crate) enum Place {
    /// A client buffer: `len` bytes at `data` (only read, for an input).
    Client { data: *mut u8, len: usize },
    /// A shared buffer of the graph's pool, given to QNN by its registration's handle.
    Shared(*const SharedBuffer),
}

impl Place {
    /// An input's client buffer (QNN takes `const` inputs; the pointer in a client buffer is
    /// declared mutable but only read for inputs).
    pub(crate) fn client(bytes: &[u8]) -> Place {
        Place::Client {
            data: bytes.as_ptr().cast_mut(),
            len: bytes.len(),
        }
    }

    /// An output's client buffer.
    pub(crate) fn client_mut(bytes: &mut [u8]) -> Place {
        Place::Client {
            data: bytes.as_mut_ptr(),
            len: bytes.len(),
        }
    }
}

/// The buffers of one execute: one place per input and per output, in the graph's order.
/// Valid while every client buffer is exactly its tensor's `byte_size` long and stays live
/// (outputs borrowed exclusively), and every shared buffer is one of this graph's pool and
/// stays live: QNN reads and writes that many bytes.
pub(crate) struct Places {
    pub inputs: Vec<Place>,
    pub outputs: Vec<Place>,
}

// SAFETY: plain addresses of buffers the execute's owner keeps (see `Places`); nothing here
// is tied to a thread.
unsafe impl Send for Places {}

/// The tensors of one execute, as QNN is given them.
pub(crate) struct AsyncTensors {
    inputs: Vec<sys::Qnn_Tensor_t>,
    outputs: Vec<sys::Qnn_Tensor_t>,
}

// SAFETY: plain C descriptions whose data pointers point into buffers the execute's owner keeps
// (see `Turn::execute_async_unchecked`); nothing here is tied to a thread.
unsafe impl Send for AsyncTensors {}

impl AsyncTensors {
    /// The arrays QNN is given (pointers into `self`, valid while it is neither moved nor
    /// dropped).
    pub(super) fn arrays(&mut self) -> TensorArrays {
        TensorArrays {
            inputs: self.inputs.as_ptr(),
            num_inputs: self.inputs.len() as u32,
            outputs: self.outputs.as_mut_ptr(),
            num_outputs: self.outputs.len() as u32,
        }
    }
}

impl Turn<'_> {
    /// The tensors QNN is given for `places` in the context handle `in_use` holds: pointers
    /// into client buffers, or the handles of shared buffers in that handle (registered
    /// there first when they are not yet). Counts the bytes of the client buffers.
    ///
    /// # Safety
    /// `places` must be [valid](Places) while the tensors are used.
    pub(super) unsafe fn tensors(
        &self,
        places: &Places,
        in_use: &OwnedHandleUse,
    ) -> Result<AsyncTensors> {
        let metadata = &self.graph.metadata;
        let tensor = |template: &TensorTemplate, place: &Place| match *place {
            Place::Client { data, len } => {
                counters::record_client_buffer_bytes(len as u64);
                Ok(template.to_raw(data, len as u32))
            }
            Place::Shared(buffer) => {
                // SAFETY: `places` is valid (the caller's contract), so `buffer` is live; the
                // context handle is kept by `in_use` until QNN is done with these tensors.
                let handle = unsafe { (*buffer).handle(in_use.raw, in_use.generation) }?;
                Ok(template.to_raw_registered(handle))
            }
        };
        Ok(AsyncTensors {
            inputs: (metadata.input_templates.iter())
                .zip(&places.inputs)
                .map(|(t, p)| tensor(t, p))
                .collect::<Result<_>>()?,
            outputs: (metadata.output_templates.iter())
                .zip(&places.outputs)
                .map(|(t, p)| tensor(t, p))
                .collect::<Result<_>>()?,
        })
    }
}
