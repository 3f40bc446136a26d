//! Answers that arrive later, by message. Work that QNN ties to a thread (the runtime's owner
//! thread) or that must wait its turn (a busy graph) finishes elsewhere; the NIF returns at once
//! and the result is sent to the caller as `{:hexagon_tpu_reply, tag, result}`, which
//! `HexagonTpu.Native.call/1` waits for in `receive`. No scheduler waits for anyone.

use std::sync::{Arc, Mutex};

use rustler::env::{OwnedEnv, SavedTerm};
use rustler::{Encoder, Env, LocalPid, Term};

use crate::atoms;

/// Where a later answer goes: the calling process and the tag it waits for.
pub struct ReplyTo {
    pid: LocalPid,
    env: OwnedEnv,
    tag: SavedTerm,
}

impl ReplyTo {
    pub fn new<'a>(env: Env<'a>, tag: Term<'a>) -> Self {
        let owned = OwnedEnv::new();
        let tag = owned.save(tag);
        ReplyTo {
            pid: env.pid(),
            env: owned,
            tag,
        }
    }

    /// Keeps `term` alive (without copying a refc binary's data) for the code that answers.
    pub fn save(&self, term: Term) -> SavedTerm {
        self.env.save(term)
    }

    /// Builds the result with `build` (which may load terms saved with [`ReplyTo::save`]) and
    /// sends it. A caller that has exited is not an error: the answer is dropped.
    pub fn send(self, build: impl for<'a> FnOnce(Env<'a>) -> Term<'a>) {
        let message = self.env.run(|env| {
            let message = (atoms::hexagon_tpu_reply(), self.tag.load(env), build(env)).encode(env);
            self.env.save(message)
        });
        let deliver = move || {
            let mut this = self;
            let pid = this.pid;
            let _ = this.env.send_and_clear(&pid, |env| message.load(env));
        };
        if rustler::thread::is_scheduler_thread() {
            // Only a thread of our own may send from an owned environment; this runs on a
            // scheduler only in a rare fallback (a graph's worker thread could not be started).
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
    let reply = ReplyTo::new(env, tag);
    let later = Arc::clone(&slot);
    start(Box::new(move |value: T| {
        let mut slot = later.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *slot {
            Slot::InCall(result) => *result = Some(value),
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
