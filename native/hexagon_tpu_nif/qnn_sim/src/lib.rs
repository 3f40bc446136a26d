//! qnn_sim: a simulated QNN backend for tests and demos.
//!
//! Built as a cdylib, this crate is a shared library that implements QNN's C entry points
//! (`QnnInterface_getProviders`, `QnnSystemInterface_getProviders` and the table functions
//! behind them) with QNN's real ABI (`qnn_sys`), error codes and handle lifetimes, over its
//! own context-binary format ([`format`](mod@format)). It computes real results for a handful of ops
//! ([`numerics`]), can be told to misbehave (faults, adversarial metadata, old API versions),
//! and counts its live handles and overlapping executes so tests can prove the runtime frees
//! everything and serializes executes per graph.
//!
//! As an rlib it provides the [`builder`] that writes context binaries, the JSON [`spec`] the
//! `qnn-sim-build` tool reads, and [`testing`] helpers that locate the built library.
//!
//! It is a test backend: not fast, not shipped, not used on a device.

pub mod builder;
pub mod ffi;
pub mod format;
pub mod model;
pub mod numerics;
pub mod spec;
pub mod testing;
