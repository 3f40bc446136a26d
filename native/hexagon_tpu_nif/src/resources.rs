//! Resource types: each wraps one `Arc` of the `qnn` object model.
//!
//! The `Arc` chain (Graph -> Context -> Runtime) gives the freeing order: when the GC drops a
//! `ContextRes` while a `GraphRes` still lives, the context stays until the graph goes. Dropping
//! these types only drops `Arc`s, and the `qnn` types never panic in `Drop` (a panic in a
//! resource destructor aborts the VM).

use std::ops::Deref;
use std::sync::Arc;

use rustler::{Decoder, NifException, NifResult, ResourceArc, Term};

pub struct RuntimeRes(pub Arc<qnn::Runtime>);
pub struct ContextRes(pub Arc<qnn::Context>);
pub struct GraphRes(pub Arc<qnn::Graph>);

#[rustler::resource_impl]
impl rustler::Resource for RuntimeRes {}

#[rustler::resource_impl]
impl rustler::Resource for ContextRes {}

#[rustler::resource_impl]
impl rustler::Resource for GraphRes {}

/// The names a handle's kind goes by in errors.
pub trait HandleKind {
    /// The Elixir struct that holds the handle, e.g. `HexagonTpu.Graph`.
    const STRUCT: &'static str;
}

impl HandleKind for RuntimeRes {
    const STRUCT: &'static str = "HexagonTpu.Runtime";
}

impl HandleKind for ContextRes {
    const STRUCT: &'static str = "HexagonTpu.Context";
}

impl HandleKind for GraphRes {
    const STRUCT: &'static str = "HexagonTpu.Graph";
}

/// A handle argument. Decodes as `ResourceArc<T>` does, but a reference that is not a handle of
/// this kind (a struct built by hand, a `make_ref()`, another kind's handle) raises an
/// `ArgumentError` that says so, where rustler would raise a bare `badarg`.
pub struct Handle<T: rustler::Resource> {
    arc: ResourceArc<T>,
}

impl<T: rustler::Resource> Deref for Handle<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.arc
    }
}

impl<'a, T: rustler::Resource + HandleKind> Decoder<'a> for Handle<T> {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        match term.decode::<ResourceArc<T>>() {
            Ok(arc) => Ok(Handle { arc }),
            Err(_) => Err(rustler::Error::RaiseTerm(Box::new(ArgumentError {
                message: format!(
                    "the reference in this {} is not a {} handle: build it with HexagonTpu's \
                     functions, never by hand (given {})",
                    T::STRUCT,
                    T::STRUCT,
                    crate::quote::cap_str(&format!("{term:?}"))
                ),
            }))),
        }
    }
}

/// Raised as Elixir's own `ArgumentError`.
#[derive(NifException)]
#[module = "ArgumentError"]
struct ArgumentError {
    message: String,
}
