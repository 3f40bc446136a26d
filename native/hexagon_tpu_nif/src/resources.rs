//! Resource types: each wraps one `Arc` of the `qnn` object model.
//!
//! The `Arc` chain (Graph -> Context -> Runtime) gives the freeing order: when the GC drops a
//! `ContextRes` while a `GraphRes` still lives, the context stays until the graph goes. Dropping
//! these types only drops `Arc`s, and the `qnn` types never panic in `Drop` (a panic in a
//! resource destructor aborts the VM).

use std::sync::Arc;

pub struct RuntimeRes(pub Arc<qnn::Runtime>);
pub struct ContextRes(pub Arc<qnn::Context>);
pub struct GraphRes(pub Arc<qnn::Graph>);

#[rustler::resource_impl]
impl rustler::Resource for RuntimeRes {}

#[rustler::resource_impl]
impl rustler::Resource for ContextRes {}

#[rustler::resource_impl]
impl rustler::Resource for GraphRes {}
