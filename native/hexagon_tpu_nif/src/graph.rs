//! `HexagonTpu.Graph`: retrieve a graph from a context, execute it, close it.
//!
//! Execute decodes the terms and hands them to `qnn::io`, which checks everything the caller can
//! get wrong and converts. Input binaries already in the model's dtype are handed to QNN in
//! place, and QNN writes outputs straight into binaries allocated here, which are returned.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use rustler::env::SavedTerm;
use rustler::{Binary, Encoder, Env, OwnedBinary, ResourceArc, Term};

use qnn::preprocess::{Plan, Spec};

use crate::atoms;
use crate::error::Failure;
use crate::protocol::{ExecuteArg, ModeArg, PerfModeArg, SpecArg};
use crate::quote;
use crate::reply::{ReplyTo, Ticket, answer, panicked};
use crate::resources::{ContextRes, GraphRes, Handle, RuntimeRes};
use crate::runtime::encode_unit;
use crate::terms::ExecutedTerm;

/// `{:ok, graph_ref} | {:error, %HexagonTpu.Error{}}` (the metadata is the context's, which
/// Elixir holds already). `site` is the Elixir caller, for the ledger of live objects.
#[rustler::nif(schedule = "DirtyIo")]
fn graph_retrieve(
    context: Handle<ContextRes>,
    name: String,
    site: String,
) -> Result<ResourceArc<GraphRes>, Failure> {
    qnn::Graph::retrieve(&context.0, &name, &qnn::Site::named(site))
        .map_err(quote::capped)
        .map(|graph| ResourceArc::new(GraphRes(graph)))
}

/// Closes the graph once the executes running or queued before it are done: `:ok` directly,
/// or by message when the graph was busy. Never waits.
#[rustler::nif]
fn graph_close<'a>(env: Env<'a>, graph: Handle<GraphRes>, tag: Term<'a>) -> Term<'a> {
    answer(env, tag, encode_unit, |done| graph.0.close_then(done))
}

/// `{:ok, %{outputs, execute_ns, profile, recovery_ns}} | {:error, %HexagonTpu.Error{}}`
/// ([`ExecutedTerm`]) when the graph was idle (the execute ran here), or `{:queued, ticket}`
/// when it was busy (or `always_queue`): the execute then runs on the graph's own thread after
/// the ones before it
/// (and, on a context with `async_queue_depth:`, in the backend's queue), and the result
/// follows by message (see `crate::reply`), unless the caller gives up first with the ticket
/// (`execute_give_up`). No scheduler ever waits for another caller's execute. With
/// `max_queued` executes waiting already it is refused: `{:error, %{reason: :overloaded}}`.
///
/// Either way the inputs are checked and converted here first, on the caller's scheduler and
/// before the graph's turn, so this caller's conversion overlaps the execute running meanwhile;
/// a direct execute converts its outputs after passing the turn on. The call's performance
/// mode is voted here too, before the execute (see [`CallVote`]).
///
/// `inputs` in model order, as binaries; `options` as [`ExecuteArg`].
#[rustler::nif(schedule = "DirtyCpu")]
fn graph_execute<'a>(
    env: Env<'a>,
    graph: Handle<GraphRes>,
    inputs: Term<'a>,
    options: ExecuteArg,
    tag: Term<'a>,
) -> Term<'a> {
    catch_unwind(AssertUnwindSafe(|| {
        execute(env, &graph, inputs, options, tag).unwrap_or_else(|failure| failure.into_error(env))
    }))
    .unwrap_or_else(|_| panicked(env, "the execute"))
}

/// [`graph_execute`]'s body: an error before the execute was submitted is its `Err`, encoded
/// `{:error, _}` by the NIF; after, the submission answers.
fn execute<'a>(
    env: Env<'a>,
    graph: &GraphRes,
    inputs: Term<'a>,
    options: ExecuteArg,
    tag: Term<'a>,
) -> Result<Term<'a>, Failure> {
    if graph.0.is_closed() {
        // Refused before its inputs are converted for nothing.
        return Err(Failure::closed("graph"));
    }
    let on_backend = graph.0.execute_queue() != qnn::ExecuteQueue::Worker;
    if on_backend && options.profile.is_some() {
        return Err(Failure::invalid_input(
            "profile: is not available on a context whose executes run in the backend's \
             queue (async_queue_depth:)",
        ));
    }
    // The whole execute when it runs here; discarded when it is queued (where it runs
    // opens its own), leaving this thread's quantize on its own.
    let span = qnn::trace::span(qnn::trace::Phase::Execute, graph.0.name());
    let input_modes: Vec<qnn::io::Mode> = options.input_modes.iter().map(|&m| m.into()).collect();
    let output_modes: Vec<qnn::io::Mode> = options.output_modes.iter().map(|&m| m.into()).collect();
    let binaries = input_binaries(inputs)?;
    let given = slices(&binaries);
    let frames = FramePasses::new(&options.input_modes, &options.frames)?;
    let prepared = qnn::io::prepare_written(
        &graph.0,
        &given,
        &input_modes,
        &output_modes,
        Some(&|index, frame, dst| frames.write(index, frame, dst)),
        OwnedBinary::new,
    );
    let execution = prepared?;
    let submission = Submission {
        graph: Arc::clone(&graph.0),
        execution,
        profile: options.profile.map(Into::into),
        _vote: CallVote::enter(&options.runtime, options.performance),
    };
    let policy = qnn::QueuePolicy {
        max_waiting: options.max_queued,
        // The backend's queue is reached from the graph's thread only: handing an
        // execute over blocks while that queue is full.
        always_queue: options.always_queue || on_backend,
    };
    Ok(submission.submit(env, &given, inputs, span, policy, tag))
}

/// The preprocessing passes of an execute's `:frame` inputs, by input index: each writes its
/// frame's model input straight into the buffer QNN reads (`qnn::io::Writer`).
struct FramePasses(Vec<(usize, Plan)>);

impl FramePasses {
    fn new(modes: &[ModeArg], specs: &[SpecArg]) -> Result<FramePasses, Failure> {
        let frames: Vec<usize> = (modes.iter().enumerate())
            .filter(|(_, m)| **m == ModeArg::Frame)
            .map(|(i, _)| i)
            .collect();
        if frames.len() != specs.len() {
            return Err(Failure::internal(format!(
                "{} frame input(s), {} pass(es)",
                frames.len(),
                specs.len()
            )));
        }
        let plans = frames.into_iter().zip(specs).map(|(index, spec)| {
            let plan =
                Plan::new(Spec::from(spec)).map_err(|e| Failure::invalid_input(e.to_string()))?;
            Ok((index, plan))
        });
        Ok(FramePasses(plans.collect::<Result<_, Failure>>()?))
    }

    fn write(&self, index: usize, frame: &[u8], dst: &mut [u8]) -> qnn::Result<()> {
        let Some((_, plan)) = self.0.iter().find(|(i, _)| *i == index) else {
            return Err(qnn::Error::Internal {
                message: format!("input #{index} has no preprocessing pass"),
            });
        };
        if plan.dst_len() != dst.len() {
            return Err(qnn::Error::InvalidInput {
                message: format!(
                    "input #{index}: the preprocessing pass makes {} bytes, the input is {}",
                    plan.dst_len(),
                    dst.len()
                ),
            });
        }
        plan.run(frame, dst).map_err(|e| qnn::Error::InvalidInput {
            message: e.to_string(),
        })
    }
}

/// A call's performance mode, voted for its execute: entered before it (the vote sent first,
/// here on the caller's dirty scheduler, when it is not in force; never waiting for another
/// caller's vote) and left when dropped, after the execute, wherever it ran. The idle thread
/// votes the runtime's own mode again once no call has been in flight for its idle delay.
struct CallVote(Option<Arc<qnn::Runtime>>);

impl CallVote {
    fn enter(runtime: &RuntimeRes, mode: Option<PerfModeArg>) -> CallVote {
        let Some(mode) = mode else {
            return CallVote(None);
        };
        if runtime.0.performance_enter(Some(mode.into())) {
            runtime.0.performance_settle();
        }
        CallVote(Some(Arc::clone(&runtime.0)))
    }
}

impl Drop for CallVote {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            // A short lock, poison-tolerant: cannot panic.
            runtime.performance_leave();
        }
    }
}

/// One execute, prepared on the caller's scheduler before its turn, and the three ways to run
/// it: [`Submission::run_here`] (the graph was idle: on the caller's dirty scheduler),
/// [`Submission::run_queued`] (on the graph's worker thread, after the executes before it) and
/// [`Submission::run_on_backend`] (handed by the worker to the backend's asynchronous queue).
/// Each ends in [`finish_and_encode`]; the call's vote is left when the submission is dropped.
struct Submission {
    graph: Arc<qnn::Graph>,
    execution: Execution,
    profile: Option<qnn::profile::Level>,
    _vote: CallVote,
}

/// An execute run, not yet finished: its outputs are converted outside the graph's turn.
type Ran = (
    Submission,
    qnn::Result<(qnn::ExecuteReport, Option<qnn::profile::Profile>)>,
);

impl Submission {
    /// Runs it now if the graph is idle (and `policy` lets this caller run it), otherwise
    /// queues it with a reply to the caller. `given` are the input bytes it was prepared from
    /// (those it did not convert go to QNN), read from the term `inputs`, kept alive for a
    /// queued execute; `span` is the `Execute` span of an execute run here.
    fn submit<'a>(
        self,
        env: Env<'a>,
        given: &[&[u8]],
        inputs: Term<'a>,
        span: qnn::trace::Span,
        policy: qnn::QueuePolicy,
        tag: Term<'a>,
    ) -> Term<'a> {
        let graph = Arc::clone(&self.graph);
        // Exactly one of the two paths below takes it.
        let submission = Cell::new(Some(self));
        let mut ticket = None;
        let started = graph.execute_or_queue(
            |turn| Some(submission.take()?.run_here(&turn, given)),
            || {
                let (mut reply, inputs) = ReplyTo::keeping(env, tag, inputs);
                ticket = Some(reply.ticket());
                let submission = submission.take();
                Box::new(move |turn: qnn::Turn<'_>| {
                    // Its caller died or gave up while it waited: not run at all.
                    if !reply.wanted() {
                        return reply.skip();
                    }
                    let Some(submission) = submission else {
                        return reply.send(|env| lost("the queued execute").into_error(env));
                    };
                    if turn.graph().execute_queue() == qnn::ExecuteQueue::Worker {
                        submission.run_queued(&turn, reply, inputs)
                    } else {
                        submission.run_on_backend(&turn, reply, inputs)
                    }
                })
            },
            policy,
        );
        match (started, ticket) {
            (Ok(qnn::Started::Ran(Some(ran))), _) => {
                // The turn is passed on already: the outputs are converted outside it.
                let answer = finish_and_encode(env, ran).encode(env);
                drop(span);
                answer
            }
            (Ok(qnn::Started::Ran(None)), _) => panicked(env, "running the execute"),
            (Ok(qnn::Started::Queued), Some(ticket)) => {
                span.discard();
                (atoms::queued(), ticket).encode(env)
            }
            (Ok(qnn::Started::Queued), None) => panicked(env, "queueing the execute"),
            (Err(error), _) => Failure::from(error).into_error(env),
        }
    }

    /// Runs it with the turn, on this thread.
    fn run_here(mut self, turn: &qnn::Turn<'_>, given: &[&[u8]]) -> Ran {
        let executed = self.execution.run(turn, given, self.profile);
        (self, executed)
    }

    /// Runs it on the graph's worker thread and answers its caller.
    fn run_queued(self, turn: &qnn::Turn<'_>, reply: ReplyTo, inputs: SavedTerm) {
        reply.send(|env| {
            let _span = qnn::trace::span(qnn::trace::Phase::Execute, turn.graph().name());
            input_binaries(inputs.load(env))
                .and_then(|binaries| {
                    finish_and_encode(env, self.run_here(turn, &slices(&binaries)))
                })
                .encode(env)
        })
    }

    /// Hands it to the backend's asynchronous queue; the notification answers its caller.
    fn run_on_backend(self, turn: &qnn::Turn<'_>, mut reply: ReplyTo, inputs: SavedTerm) {
        // The graph's part: the inputs copied and the submission (the run is the backend's).
        let _span = qnn::trace::span(qnn::trace::Phase::Execute, turn.graph().name());
        let Submission {
            graph,
            mut execution,
            profile,
            _vote,
        } = self;
        // The inputs given in the model's type are copied: the execute outlives this environment.
        let owned = reply.with_env(|env| {
            input_binaries(inputs.load(env)).map(|b| execution.own_inputs(&slices(&b)))
        });
        if let Some(Err(failure)) = owned {
            return reply.send(move |env| failure.into_error(env));
        }
        execution.run_on_backend(turn, move |execution, result| {
            let submission = Submission {
                graph,
                execution,
                profile,
                _vote,
            };
            let executed = result.map(|report| (report, None));
            reply.send(|env| finish_and_encode(env, (submission, executed)).encode(env))
        });
    }
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

/// The caller's one await or cancel of a queued execute (`HexagonTpu.Graph.await/2`,
/// `cancel/1`): `true` the first time, `false` once its answer was taken or given up.
#[rustler::nif]
fn execute_claim(ticket: ResourceArc<Ticket>) -> bool {
    ticket.claim()
}

/// An output in a shared buffer, under the resource binary handed to Elixir.
pub struct SharedOutput(qnn::SharedBuffer);

#[rustler::resource_impl]
impl rustler::Resource for SharedOutput {}

/// An execute's inputs and output buffers, prepared before its turn (`qnn::io::prepare`).
type Execution = qnn::io::Execution<OwnedBinary>;

fn lost(what: &str) -> Failure {
    Failure::internal(format!("{what} lost its prepared data"))
}

/// The input binaries of an execute, from its list of terms.
fn input_binaries(inputs: Term<'_>) -> Result<Vec<Binary<'_>>, Failure> {
    let invalid = Failure::invalid_input;
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

/// The execute's answer once it ran ([`ExecutedTerm`]): its outputs converted as asked, and
/// the profile and the recovery's wait when there were any. Every way to run an execute ends
/// here; the submission (and with it the call's vote) is dropped once it is encoded.
fn finish_and_encode<'a>(
    env: Env<'a>,
    (submission, executed): Ran,
) -> Result<ExecutedTerm<'a>, Failure> {
    let (report, profile) = executed?;
    let outputs = (submission.execution).finish(submission.graph.info(), OwnedBinary::new)?;
    let outputs: Vec<Binary<'a>> = (outputs.into_iter())
        .map(|output| match output {
            qnn::io::Output::Buffer(binary) => binary.release(env),
            // A resource binary over the shared buffer: no copy; the buffer goes back to its
            // pool when the VM frees the binary.
            qnn::io::Output::Shared(buffer) => {
                ResourceArc::new(SharedOutput(buffer)).make_binary(env, |o| &o.0)
            }
        })
        .collect();
    Ok(ExecutedTerm {
        outputs,
        execute_ns: report.execute_ns,
        profile: profile.as_ref().map(Into::into),
        recovery_ns: report.recovery_ns,
    })
}
