//! Answers that arrive later, by message. Work that QNN ties to a thread (the runtime's owner
//! thread) or that must wait its turn (a busy graph) finishes elsewhere; the NIF returns at once
//! and the result is sent to the caller as `{:hexagon_tpu_reply, tag, result}`, which
//! `HexagonTpu.Native.call/1` (or, for an execute, `HexagonTpu.Native.reply/3`) waits for in
//! `receive`. No scheduler waits for anyone.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rustler::env::{OwnedEnv, SavedTerm};
use rustler::{Encoder, Env, LocalPid, Resource, ResourceArc, Term};

use crate::atoms;
use crate::error::Failure;

/// Where a later answer goes: the calling process and the tag it waits for. A `ReplyTo` that is
/// dropped without having sent (the work panicked, or was dropped unrun) sends an `:internal`
/// error instead, so no caller waits in `receive` forever.
pub struct ReplyTo {
    /// `None` once sent, or once the NIF answered directly ([`ReplyTo::disarm`]).
    inner: Option<Inner>,
    /// Shared with a caller that may give up waiting ([`Ticket`]).
    ticket: Option<ResourceArc<Ticket>>,
}

/// A queued execute's answer, as its caller may see it: the caller holds the ticket and may give
/// up (the `timeout` of `HexagonTpu.Native.reply/3`, through `give_up/2`) until the answer is sent; an answer given up on is
/// never sent, and work whose caller gave up before its turn is skipped.
pub struct Ticket {
    state: Mutex<TicketState>,
    /// Its caller took the answer or gave it up (`HexagonTpu.Graph.await/2` or `cancel/1`):
    /// a second of either has nothing to wait for.
    claimed: AtomicBool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TicketState {
    Pending,
    Sent,
    GaveUp,
}

#[rustler::resource_impl]
impl Resource for Ticket {}

impl Ticket {
    fn lock(&self) -> std::sync::MutexGuard<'_, TicketState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The caller's one await or cancel of it: `true` the first time, `false` after.
    pub fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }

    /// The caller gives up: `true` when the answer had not been sent (it never will be), `false`
    /// when it was (it is in the caller's mailbox or on its way).
    pub fn give_up(&self) -> bool {
        let mut state = self.lock();
        match *state {
            TicketState::Pending => {
                *state = TicketState::GaveUp;
                qnn::counters::record_timed_out();
                true
            }
            TicketState::Sent | TicketState::GaveUp => false,
        }
    }
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
            ticket: None,
        }
    }

    /// The ticket its caller holds to give up waiting (made here, for the NIF to return).
    pub fn ticket(&mut self) -> ResourceArc<Ticket> {
        let ticket = ResourceArc::new(Ticket {
            state: Mutex::new(TicketState::Pending),
            claimed: AtomicBool::new(false),
        });
        self.ticket = Some(ticket.clone());
        ticket
    }

    /// Whether the answer is still wanted: its caller is alive and has not given up. Work that is
    /// not wanted is skipped ([`ReplyTo::skip`]).
    pub fn wanted(&mut self) -> bool {
        if self
            .ticket
            .as_ref()
            .is_some_and(|t| *t.lock() == TicketState::GaveUp)
        {
            return false;
        }
        match &mut self.inner {
            Some(inner) => {
                let pid = inner.pid;
                inner.env.run(|env| pid.is_alive(env))
            }
            None => false,
        }
    }

    /// Runs `work` in the answer's environment (where [`ReplyTo::keeping`] saved its term), before
    /// the answer is built; `None` once the answer is gone.
    pub fn with_env<R>(&mut self, work: impl for<'a> FnOnce(Env<'a>) -> R) -> Option<R> {
        self.inner.as_mut().map(|inner| inner.env.run(work))
    }

    /// Nothing will be sent: the work was skipped, its caller gone or given up.
    pub fn skip(mut self) {
        qnn::counters::record_skipped();
        self.disarm();
    }

    /// Builds the result with `build` (which may load the term [`ReplyTo::keeping`] saved) and
    /// sends it. A caller that has exited is not an error: the answer is dropped.
    pub fn send(mut self, build: impl for<'a> FnOnce(Env<'a>) -> Term<'a>) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        // Built first (for an execute, `build` runs it), then sent under the ticket's lock, so a
        // caller giving up sees either "not sent, never will be" or "sent", and never waits for
        // the work.
        let message = inner.build(build);
        match &self.ticket {
            Some(ticket) => {
                let mut state = ticket.lock();
                if *state == TicketState::Pending {
                    *state = TicketState::Sent;
                    message.deliver();
                }
            }
            None => message.deliver(),
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
                Failure::internal("an operation ended without an answer").into_error(env)
            });
        }
    }
}

/// `{:error, %HexagonTpu.Error{reason: :internal}}` for work that panicked.
pub fn panicked<'a>(env: Env<'a>, what: &str) -> Term<'a> {
    Failure::internal(format!("{what} panicked")).into_error(env)
}

/// An answer built and ready to be delivered.
struct Built {
    inner: Inner,
    message: SavedTerm,
}

impl Inner {
    fn send(self, build: impl for<'a> FnOnce(Env<'a>) -> Term<'a>) {
        self.build(build).deliver();
    }

    fn build(self, build: impl for<'a> FnOnce(Env<'a>) -> Term<'a>) -> Built {
        let message = self.env.run(|env| {
            // A panic while building the answer still answers, so the caller never waits
            // forever.
            let result = catch_unwind(AssertUnwindSafe(|| build(env)))
                .unwrap_or_else(|_| panicked(env, "the operation"));
            let message = (atoms::hexagon_tpu_reply(), self.tag.load(env), result).encode(env);
            self.env.save(message)
        });
        Built {
            inner: self,
            message,
        }
    }
}

impl Built {
    fn deliver(self) {
        let Built { inner, message } = self;
        let deliver = move || {
            let mut inner = inner;
            let pid = inner.pid;
            let _ = catch_unwind(AssertUnwindSafe(|| {
                inner.env.send_and_clear(&pid, |env| message.load(env))
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
