//! `%HexagonTpu.Error{}`: the one error term every NIF returns.
//!
//! A NIF returns `Result<T, Failure>`, which rustler encodes as `{:ok, T}` or `{:error,
//! %HexagonTpu.Error{}}`; a NIF whose success carries nothing returns [`Done`] (`:ok` or
//! `{:error, _}`). No NIF builds either tuple itself.

use rustler::{Atom, Encoder, Env, NifException, Term};

use crate::atoms;

/// Encodes as `%HexagonTpu.Error{reason: atom, message: string, qnn_code: integer | nil}`.
#[derive(Debug, NifException)]
#[module = "HexagonTpu.Error"]
#[rustler(encode)]
struct NifError {
    reason: Atom,
    message: String,
    qnn_code: Option<u32>,
}

/// A `qnn::Error` on its way to Elixir, where it becomes `%HexagonTpu.Error{}` (the reason atom
/// is made at encoding, when there is an `Env`).
#[derive(Debug)]
pub struct Failure(qnn::Error);

impl From<qnn::Error> for Failure {
    fn from(e: qnn::Error) -> Self {
        Failure(e)
    }
}

impl Failure {
    /// `:invalid_input`, with `message`.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Failure(qnn::Error::InvalidInput {
            message: message.into(),
        })
    }

    /// `:internal`, with `message`.
    pub fn internal(message: impl Into<String>) -> Self {
        Failure(qnn::Error::Internal {
            message: message.into(),
        })
    }

    /// `:closed`: the `what` (runtime, graph) was closed.
    pub fn closed(what: &'static str) -> Self {
        Failure(qnn::Error::Closed { what })
    }

    /// `{:error, %HexagonTpu.Error{}}` (rustler's encoding of `Err(self)`), for the answers
    /// that are not one `Result`: an execute's, which may be `{:queued, ticket}`, and a reply
    /// whose work panicked or was lost.
    pub fn into_error(self, env: Env<'_>) -> Term<'_> {
        Err::<(), Failure>(self).encode(env)
    }
}

impl Encoder for Failure {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        let e = &self.0;
        NifError {
            // Reasons are a small fixed set of static names; fall back rather than fail.
            reason: Atom::from_str(env, e.reason()).unwrap_or_else(|_| atoms::internal()),
            message: e.to_string(),
            qnn_code: e.qnn_code(),
        }
        .encode(env)
    }
}

/// `:ok` or `{:error, E}` (by default `E` is `%HexagonTpu.Error{}`): the answer of a NIF whose
/// success carries nothing.
pub struct Done<E = Failure>(pub Result<(), E>);

impl<E, F: Into<E>> From<Result<(), F>> for Done<E> {
    fn from(result: Result<(), F>) -> Self {
        Done(result.map_err(Into::into))
    }
}

impl<E: Encoder> Encoder for Done<E> {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        match &self.0 {
            Ok(()) => atoms::ok().encode(env),
            Err(error) => Err::<(), &E>(error).encode(env),
        }
    }
}
