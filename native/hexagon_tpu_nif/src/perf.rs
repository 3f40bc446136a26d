//! `HexagonTpu.Runtime`'s performance modes: the runtime's mode and what was voted. A call's
//! mode is voted with its execute (`crate::graph`'s `CallVote`); the votes themselves are
//! `qnn::perf`'s.

use rustler::{Atom, Env, NifMap, Term};

use crate::error::{Done, Failure};
use crate::protocol::PerfModeArg;
use crate::resources::{Handle, RuntimeRes};

/// A mode's atom.
pub fn mode_atom(env: Env<'_>, mode: qnn::PerfMode) -> Atom {
    // The names are fixed identifiers; this cannot fail in practice.
    Atom::from_str(env, mode.name()).unwrap_or_else(|_| crate::atoms::none())
}

/// A DCVS v3 config as a map with the C field names.
pub fn dcvs_map<'a>(env: Env<'a>, d: &qnn::sys::QnnHtpPerfInfrastructure_DcvsV3_t) -> Term<'a> {
    let pairs = [
        ("contextId", d.contextId),
        ("setDcvsEnable", d.setDcvsEnable),
        ("dcvsEnable", d.dcvsEnable),
        ("powerMode", d.powerMode),
        ("setSleepLatency", d.setSleepLatency),
        ("sleepLatency", d.sleepLatency),
        ("setSleepDisable", d.setSleepDisable),
        ("sleepDisable", d.sleepDisable),
        ("setBusParams", d.setBusParams),
        ("busVoltageCornerMin", d.busVoltageCornerMin),
        ("busVoltageCornerTarget", d.busVoltageCornerTarget),
        ("busVoltageCornerMax", d.busVoltageCornerMax),
        ("setCoreParams", d.setCoreParams),
        ("coreVoltageCornerMin", d.coreVoltageCornerMin),
        ("coreVoltageCornerTarget", d.coreVoltageCornerTarget),
        ("coreVoltageCornerMax", d.coreVoltageCornerMax),
    ];
    let pairs: Vec<(Term<'a>, Term<'a>)> = pairs
        .into_iter()
        .filter_map(|(name, value)| {
            Some((
                rustler::Encoder::encode(&Atom::from_str(env, name).ok()?, env),
                rustler::Encoder::encode(&value, env),
            ))
        })
        .collect();
    Term::map_from_pairs(env, &pairs).unwrap_or_else(|_| rustler::types::map::map_new(env))
}

#[derive(NifMap)]
#[rustler(encode)]
struct VoteTerm<'a> {
    mode: Atom,
    dcvs_v3: Term<'a>,
    rpc_polling_time: u32,
}

#[derive(NifMap)]
#[rustler(encode)]
struct PerfStateTerm<'a> {
    mode: Atom,
    voted: Atom,
    available: bool,
    last_vote: Option<VoteTerm<'a>>,
}

/// Changes the runtime's mode and votes it (an RPC: dirty IO). `:ok | {:error, closed}`
#[rustler::nif(schedule = "DirtyIo")]
fn runtime_set_performance(runtime: Handle<RuntimeRes>, mode: PerfModeArg) -> Done {
    Done::from(runtime.0.set_performance(mode.into()))
}

/// `{:ok, %{mode, voted, available, last_vote}} | {:error, closed}`. Never waits for a vote
/// being sent: a normal scheduler.
#[rustler::nif]
fn runtime_performance<'a>(
    env: Env<'a>,
    runtime: Handle<RuntimeRes>,
) -> Result<PerfStateTerm<'a>, Failure> {
    if runtime.0.is_closed() {
        return Err(Failure::closed("runtime"));
    }
    let state = runtime.0.performance();
    Ok(PerfStateTerm {
        mode: mode_atom(env, state.mode),
        voted: mode_atom(env, state.voted),
        available: state.available,
        last_vote: state.last_vote.map(|vote| VoteTerm {
            mode: mode_atom(env, vote.mode),
            dcvs_v3: dcvs_map(env, &vote.dcvs_v3),
            rpc_polling_time: vote.rpc_polling_time,
        }),
    })
}
