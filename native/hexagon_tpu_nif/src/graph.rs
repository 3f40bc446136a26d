//! `HexagonTpu.Graph`: retrieve a graph from a context, execute it, close it.
//!
//! Execute decodes the terms and hands them to `qnn::io`, which checks everything the caller can
//! get wrong and converts. Input binaries already in the model's dtype are handed to QNN in
//! place, and QNN writes outputs straight into binaries allocated here, which are returned.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use rustler::env::SavedTerm;
use rustler::{Binary, Encoder, Env, NifUnitEnum, OwnedBinary, ResourceArc, Term};

use crate::atoms;
use crate::error::{Failure, ok_or_error};
use crate::quote;
use crate::reply::{ReplyTo, Ticket, answer, panicked};
use crate::resources::{ContextRes, GraphRes, Handle};
use crate::runtime::encode_unit;

/// `qnn::io::Mode` as an atom: `:model` (the model's own dtype, passed through untouched) or
/// `:f32` (converted with the tensor's quantization parameters).
#[derive(NifUnitEnum, Clone, Copy)]
pub enum Mode {
    Model,
    F32,
}

impl From<Mode> for qnn::io::Mode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Model => qnn::io::Mode::Model,
            Mode::F32 => qnn::io::Mode::F32,
        }
    }
}

/// `{:ok, graph_ref} | {:error, %HexagonTpu.Error{}}` (the metadata is the context's, which
/// Elixir holds already). `site` is the Elixir caller, for the ledger of live objects.
#[rustler::nif(schedule = "DirtyIo")]
fn graph_retrieve<'a>(
    env: Env<'a>,
    context: Handle<ContextRes>,
    name: String,
    site: String,
) -> Term<'a> {
    let result = qnn::Graph::retrieve(&context.0, &name, &qnn::Site::named(site))
        .map_err(quote::capped)
        .map(|graph| ResourceArc::new(GraphRes(graph)));
    ok_or_error(env, result)
}

/// Closes the graph once the executes running or queued before it are done: `:ok` directly,
/// or by message when the graph was busy. Never waits.
#[rustler::nif]
fn graph_close<'a>(env: Env<'a>, graph: Handle<GraphRes>, tag: Term<'a>) -> Term<'a> {
    answer(env, tag, encode_unit, |done| graph.0.close_then(done))
}

/// `{:ok, {[output_binary], execute_ns}} | {:error, %HexagonTpu.Error{}}` (with a third element,
/// the profile's map, when `profile` asked for one or the graph sampled this execute) when the graph was
/// idle (the execute ran here), or `{:queued, ticket}` when it was busy (or `always_queue`): the
/// execute then runs on the graph's own thread after the ones before it, and the result follows
/// by message (see `crate::reply`), unless the caller gives up first with the ticket
/// (`execute_give_up`). No scheduler ever waits for another caller's execute. With
/// `max_queued` executes waiting already it is refused: `{:error, %{reason: :overloaded}}`.
///
/// Either way the inputs are checked and converted here first, on the caller's scheduler and
/// before the graph's turn, so this caller's conversion overlaps the execute running meanwhile;
/// a direct execute converts its outputs after passing the turn on.
///
/// `inputs` in model order; `input_modes` / `output_modes` say, per tensor, whether the bytes
/// are in the model's dtype (`:model`) or f32 (`:f32`).
#[rustler::nif(schedule = "DirtyCpu")]
#[allow(clippy::too_many_arguments)]
fn graph_execute<'a>(
    env: Env<'a>,
    graph: Handle<GraphRes>,
    inputs: Term<'a>,
    input_modes: Vec<Mode>,
    output_modes: Vec<Mode>,
    max_queued: usize,
    always_queue: bool,
    tag: Term<'a>,
    profile: Option<crate::profile::Level>,
) -> Term<'a> {
    catch_unwind(AssertUnwindSafe(|| {
        if graph.0.is_closed() {
            // Refused before its inputs are converted for nothing.
            return Failure::Qnn(qnn::Error::Closed { what: "graph" }).encode_error(env);
        }
        let on_backend = graph.0.execute_queue() != qnn::ExecuteQueue::Worker;
        if on_backend && profile.is_some() {
            let message = "profile: is not available on a context whose executes run in the \
                           backend's queue (async_queue_depth:)"
                .to_string();
            return Failure::Qnn(qnn::Error::InvalidInput { message }).encode_error(env);
        }
        // The whole execute when it runs here; discarded when it is queued (the graph's thread
        // records its own), leaving this thread's quantize on its own.
        let span = qnn::trace::span(qnn::trace::Phase::Execute, graph.0.name());
        let input_modes: Vec<qnn::io::Mode> = input_modes.iter().map(|&m| m.into()).collect();
        let output_modes: Vec<qnn::io::Mode> = output_modes.iter().map(|&m| m.into()).collect();
        let binaries = match input_binaries(inputs) {
            Ok(binaries) => binaries,
            Err(failure) => return failure.encode_error(env),
        };
        let given = slices(&binaries);
        let prepared = qnn::io::prepare(
            graph.0.info(),
            &given,
            &input_modes,
            &output_modes,
            OwnedBinary::new,
        );
        match prepared {
            Ok(execution) => {
                let policy = qnn::QueuePolicy {
                    max_waiting: max_queued,
                    // The backend's queue is reached from the graph's thread only: handing an
                    // execute over blocks while that queue is full.
                    always_queue: always_queue || on_backend,
                };
                let prepared = Prepared {
                    execution,
                    given: &given,
                    inputs,
                    span,
                    profile,
                };
                submit(env, &graph.0, prepared, policy, tag)
            }
            Err(error) => Failure::Qnn(error).encode_error(env),
        }
    }))
    .unwrap_or_else(|_| panicked(env, "the execute"))
}

/// An execute prepared on the caller's scheduler, before its turn.
struct Prepared<'a, 'g> {
    execution: Execution,
    /// The input bytes `execution` was prepared from (those it did not convert go to QNN).
    given: &'g [&'g [u8]],
    /// The term `given` was read from, kept alive for a queued execute.
    inputs: Term<'a>,
    /// The trace's span of the whole execute, if it runs here.
    span: qnn::trace::Span,
    /// A profile of this execute, asked for by the caller.
    profile: Option<crate::profile::Level>,
}

/// Runs a prepared execute now if the graph is idle (and `policy` lets this caller run it),
/// otherwise queues it with a reply to the caller.
fn submit<'a>(
    env: Env<'a>,
    graph: &Arc<qnn::Graph>,
    prepared: Prepared<'a, '_>,
    policy: qnn::QueuePolicy,
    tag: Term<'a>,
) -> Term<'a> {
    let Prepared {
        execution,
        given,
        inputs,
        span,
        profile,
    } = prepared;
    // Exactly one of the two paths below takes it.
    let execution = Cell::new(Some(execution));
    let mut ticket = None;
    let started = graph.execute_or_queue(
        |turn| {
            let mut execution = execution.take()?;
            let executed = execution.run(&turn, given, profile.map(Into::into));
            Some((execution, executed))
        },
        || {
            let (mut reply, inputs) = ReplyTo::keeping(env, tag, inputs);
            ticket = Some(reply.ticket());
            let execution = execution.take();
            let graph = Arc::clone(graph);
            Box::new(move |turn: qnn::Turn<'_>| {
                // Its caller died or gave up while it waited: not run at all.
                if !reply.wanted() {
                    return reply.skip();
                }
                if graph.execute_queue() != qnn::ExecuteQueue::Worker {
                    return run_on_backend(&turn, graph, execution, reply, inputs);
                }
                reply.send(|env| {
                    let _span = qnn::trace::span(qnn::trace::Phase::Execute, turn.graph().name());
                    let result = execution
                        .ok_or_else(|| lost("the queued execute"))
                        .and_then(|mut execution| {
                            let binaries = input_binaries(inputs.load(env))?;
                            let executed =
                                execution.run(&turn, &slices(&binaries), profile.map(Into::into));
                            finish(env, turn.graph(), execution, executed)
                        });
                    ok_or_error(env, result)
                })
            })
        },
        policy,
    );
    if ticket.is_some() {
        span.discard();
    }
    match (started, ticket) {
        (Ok(qnn::Started::Ran(Some((execution, executed)))), _) => {
            // The turn is passed on already: the outputs are converted outside it.
            ok_or_error(env, finish(env, graph, execution, executed))
        }
        (Ok(qnn::Started::Ran(None)), _) => panicked(env, "running the execute"),
        (Ok(qnn::Started::Queued), Some(ticket)) => (atoms::queued(), ticket).encode(env),
        (Ok(qnn::Started::Queued), None) => panicked(env, "queueing the execute"),
        (Err(error), _) => Failure::Qnn(error).encode_error(env),
    }
}
/// Hands a queued execute to the backend's asynchronous queue; the notification answers it.
fn run_on_backend(
    turn: &qnn::Turn<'_>,
    graph: Arc<qnn::Graph>,
    execution: Option<Execution>,
    mut reply: ReplyTo,
    inputs: SavedTerm,
) {
    let Some(mut execution) = execution else {
        return reply.send(|env| lost("the queued execute").encode_error(env));
    };
    // The inputs given in the model's type are copied: the execute outlives this environment.
    let owned = reply.with_env(|env| {
        input_binaries(inputs.load(env)).map(|b| execution.own_inputs(&slices(&b)))
    });
    if let Some(Err(failure)) = owned {
        return reply.send(move |env| failure.encode_error(env));
    }
    execution.run_on_backend(turn, move |execution, result| {
        reply.send(|env| {
            let executed = result.map(|report| (report, None));
            ok_or_error(env, finish(env, &graph, execution, executed))
        })
    });
}

/// The caller of a queued execute gives up waiting: `:given_up` when its answer had not been
/// sent (it never will be; the execute is skipped if it has not started), `:sent` when it was
/// (the caller takes it from its mailbox).
#[rustler::nif]
fn execute_give_up(ticket: ResourceArc<Ticket>) -> rustler::Atom {
    if ticket.give_up() {
        atoms::given_up()
    } else {
        atoms::sent()
    }
}

/// An execute's inputs and output buffers, prepared before its turn (`qnn::io::prepare`).
type Execution = qnn::io::Execution<OwnedBinary>;

fn lost(what: &str) -> Failure {
    Failure::Qnn(qnn::Error::Internal {
        message: format!("{what} lost its prepared data"),
    })
}

/// The input binaries of an execute, from its list of terms.
fn input_binaries(inputs: Term<'_>) -> Result<Vec<Binary<'_>>, Failure> {
    let invalid = |message: String| Failure::Qnn(qnn::Error::InvalidInput { message });
    let terms: Vec<Term<'_>> = inputs
        .decode()
        .map_err(|_| invalid("inputs must be a list".to_string()))?;
    terms
        .iter()
        .enumerate()
        .map(|(index, term)| {
            Binary::from_term(*term).map_err(|_| {
                invalid(format!(
                    "input #{index}: expected a binary, given {:?}",
                    term.get_type()
                ))
            })
        })
        .collect()
}

fn slices<'b>(binaries: &'b [Binary<'_>]) -> Vec<&'b [u8]> {
    binaries.iter().map(Binary::as_slice).collect()
}

/// `{[output_binary], execute_ns}` once the execute ran: its outputs converted as asked (and
/// a third element, the profile's map, when it was profiled).
fn finish<'a>(
    env: Env<'a>,
    graph: &qnn::Graph,
    execution: Execution,
    executed: qnn::Result<(qnn::ExecuteReport, Option<qnn::profile::Profile>)>,
) -> Result<Term<'a>, Failure> {
    let (report, profile) = executed?;
    let outputs = execution.finish(graph.info(), OwnedBinary::new)?;
    let outputs: Vec<Binary<'a>> = outputs.into_iter().map(|b| b.release(env)).collect();
    Ok(match profile {
        None => (outputs, report.execute_ns).encode(env),
        Some(p) => (outputs, report.execute_ns, crate::profile::encode(env, &p)).encode(env),
    })
}
