//! What a context binary holds and the host-side math on its tensors: reading a model file,
//! tensor metadata, the binary's graphs, quantization kernels. Imports `base`, `observe`, `ffi`.

pub(crate) mod buffers;
pub mod metadata;
pub mod model_file;
pub mod preflight;
pub mod quant;
pub mod tensor;
