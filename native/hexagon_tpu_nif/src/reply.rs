//! Answers that arrive later, by message. Work that QNN ties to a thread (the runtime's owner
//! thread) or that must wait its turn (a busy graph) finishes elsewhere; the NIF returns at once
//! and the result is sent to the caller as `{:hexagon_tpu_reply, tag, result}`, which
//! `HexagonTpu.Native.call/1` waits for in `receive`. No scheduler waits for anyone.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use rustler::env::{OwnedEnv, SavedTerm};
use rustler::{Encoder, Env, LocalPid, Term};

use crate::atoms;
use crate::error::Failure;

/// Where a later answer goes: the calling process and the tag it waits for. A `ReplyTo` that is
/// dropped without having sent (the work panicked, or was dropped unrun) sends an `:internal`
/// error instead, so no caller waits in `receive` forever.
pub struct ReplyTo {
    /// `None` once sent, or once the NIF answered directly ([`ReplyTo::disarm`]).
    inner: Option<Inner>,
}

struct Inner {
    pid: LocalPid,
    env: OwnedEnv,
    tag: SavedTerm,
}

impl ReplyTo {
    pub fn new<'a>(env: Env<'a>, tag: Term<'a>) -> Self {
        Self::in_env(env, tag, OwnedEnv::new())
    }

    /// A `ReplyTo` that also keeps `term` alive (without copying a refc binary's data) for the
    /// code that answers later, which loads it inside [`ReplyTo::send`]'s `build`.
    pub fn keeping<'a>(env: Env<'a>, tag: Term<'a>, term: Term<'a>) -> (Self, SavedTerm) {
        let owned = OwnedEnv::new();
        let saved = owned.save(term);
        (Self::in_env(env, tag, owned), saved)
    }

    fn in_env<'a>(env: Env<'a>, tag: Term<'a>, owned: OwnedEnv) -> Self {
        let tag = owned.save(tag);
        ReplyTo {
            inner: Some(Inner {
                pid: env.pid(),
                env: owned,
                tag,
            }),
        }
    }

    /// Builds the result with `build` (which may load the term [`ReplyTo::keeping`] saved) and
    /// sends it. A caller that has exited is not an error: the answer is dropped.
    pub fn send(mut self, build: impl for<'a> FnOnce(Env<'a>) -> Term<'a>) {
        if let Some(inner) = self.inner.take() {
            inner.send(build);
        }
    }

    /// Nothing is to be sent: the NIF answered the caller directly.
    fn disarm(&mut self) {
        self.inner = None;
    }
}

impl Drop for ReplyTo {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.send(|env| {
                let lost = qnn::Error::Internal {
                    message: "an operation ended without an answer".into(),
                };
                Failure::Qnn(lost).encode_error(env)
            });
        }
    }
}

/// `{:error, %HexagonTpu.Error{reason: :internal}}` for work that panicked.
pub fn panicked<'a>(env: Env<'a>, what: &str) -> Term<'a> {
    let error = qnn::Error::Internal {
        message: format!("{what} panicked"),
    };
    Failure::Qnn(error).encode_error(env)
}

impl Inner {
    fn send(self, build: impl for<'a> FnOnce(Env<'a>) -> Term<'a>) {
        let message = self.env.run(|env| {
            // A panic while building the answer still answers, so the caller never waits
            // forever.
            let result = catch_unwind(AssertUnwindSafe(|| build(env)))
                .unwrap_or_else(|_| panicked(env, "the operation"));
            let message = (atoms::hexagon_tpu_reply(), self.tag.load(env), result).encode(env);
            self.env.save(message)
        });
        let deliver = move || {
            let mut this = self;
            let pid = this.pid;
            let _ = catch_unwind(AssertUnwindSafe(|| {
                this.env.send_and_clear(&pid, |env| message.load(env))
            }));
        };
        if rustler::thread::is_scheduler_thread() {
            // Only a thread of our own may send from an owned environment; this runs on a
            // scheduler only in rare fallbacks (a graph's worker thread could not be started, or
            // unanswered work was dropped there).
            let _ = std::thread::Builder::new()
                .name("hexagon-tpu-reply".into())
                .spawn(deliver);
        } else {
            deliver();
        }
    }
}

/// Runs `start`, which finishes by calling the callback it is given, on this thread or another.
/// Answers directly when it finished before `start` returned, otherwise `:queued`, and the result
/// follows by message.
pub fn answer<'a, T: Send + 'static>(
    env: Env<'a>,
    tag: Term<'a>,
    encode: fn(Env<'_>, T) -> Term<'_>,
    start: impl FnOnce(Box<dyn FnOnce(T) + Send>),
) -> Term<'a> {
    enum Slot<T> {
        InCall(Option<T>),
        Returned,
    }
    let slot = Arc::new(Mutex::new(Slot::InCall(None)));
    let mut reply = ReplyTo::new(env, tag);
    let later = Arc::clone(&slot);
    start(Box::new(move |value: T| {
        let mut slot = later.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *slot {
            Slot::InCall(result) => {
                // Answered before the NIF returns: it answers directly.
                *result = Some(value);
                reply.disarm();
            }
            Slot::Returned => {
                drop(slot);
                reply.send(move |env| encode(env, value));
            }
        }
    }));
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    match std::mem::replace(&mut *slot, Slot::Returned) {
        Slot::InCall(Some(value)) => encode(env, value),
        _ => atoms::queued().encode(env),
    }
}
