//! `%HexagonTpu.Error{}`: the one error term every NIF returns.

use rustler::{Atom, Encoder, Env, NifException, Term};

use crate::atoms;

/// Encodes as `%HexagonTpu.Error{reason: atom, message: string, qnn_code: integer | nil}`.
#[derive(Debug, NifException)]
#[module = "HexagonTpu.Error"]
#[rustler(encode)]
pub struct NifError {
    pub reason: Atom,
    pub message: String,
    pub qnn_code: Option<u32>,
}

/// An error before the reason atom has been made (atoms need an `Env`).
#[derive(Debug)]
pub enum Failure {
    Qnn(qnn::Error),
}

impl From<qnn::Error> for Failure {
    fn from(e: qnn::Error) -> Self {
        Failure::Qnn(e)
    }
}

impl Failure {
    pub fn to_nif_error(&self, env: Env) -> NifError {
        match self {
            Failure::Qnn(e) => NifError {
                // Reasons are a small fixed set of static names; fall back rather than fail.
                reason: Atom::from_str(env, e.reason()).unwrap_or_else(|_| atoms::internal()),
                message: e.to_string(),
                qnn_code: e.qnn_code(),
            },
        }
    }

    /// `{:error, %HexagonTpu.Error{}}`
    pub fn encode_error<'a>(&self, env: Env<'a>) -> Term<'a> {
        (atoms::error(), self.to_nif_error(env)).encode(env)
    }
}

/// `{:ok, value}` or `{:error, %HexagonTpu.Error{}}`.
pub fn ok_or_error<'a, T: Encoder>(env: Env<'a>, result: Result<T, Failure>) -> Term<'a> {
    match result {
        Ok(value) => (atoms::ok(), value).encode(env),
        Err(failure) => failure.encode_error(env),
    }
}

/// `:ok` or `{:error, %HexagonTpu.Error{}}`.
pub fn unit_or_error<'a>(env: Env<'a>, result: Result<(), Failure>) -> Term<'a> {
    match result {
        Ok(()) => atoms::ok().encode(env),
        Err(failure) => failure.encode_error(env),
    }
}
