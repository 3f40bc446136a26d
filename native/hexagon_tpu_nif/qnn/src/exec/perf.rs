//! Performance modes: votes on the HTP's power state through the backend's perf infrastructure
//! (`deviceGetInfrastructure` → `createPowerConfigId`, `setPowerConfig`,
//! `destroyPowerConfigId`).
//!
//! Each runtime has one `Voter`: a power config id created on its owner thread right after
//! the device (device 0, core 0, as ONNX Runtime's QNN EP does), the runtime's own mode, the
//! mode a call asked for, and the parameters of the vote in force (kept so that a recovery
//! after a DSP restart can replay them, as Qualcomm's HTP library does with its own DCVS v3
//! votes: `Voter::replay`). The id is destroyed on the owner thread when the runtime's
//! handles are freed, before the device.
//!
//! No vote is sent twice: a vote goes to the backend only when the mode wanted differs from the
//! mode last voted, so back-to-back executes with one mode cost no RPC after the first
//! (onnxruntime-qnn PR #781 fixes the opposite: a `setPowerConfig` on every inference). A call
//! that asks for another mode than its runtime's votes it before its execute and keeps it while
//! calls keep coming; the idle thread votes the runtime's mode again once no call has used the
//! runtime for its idle delay ([`DEFAULT_IDLE`]) and none is running.
//!
//! A vote is a QNN call that crosses to the DSP (an RPC): it runs on the owner thread, on a
//! dirty scheduler or on the idle thread, never on a normal scheduler, and never waits for
//! another caller's vote: whoever holds the vote lock sends the votes wanted meanwhile. A vote the
//! backend refuses fails nothing: it is counted (`performance_votes_refused`), logged once per
//! runtime, and the calls run at the clocks they have.

mod idle;
mod mode;
mod power;
mod voter;

pub use mode::*;
pub(crate) use voter::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_a_name_and_back() {
        for mode in PerfMode::ALL {
            assert_eq!(PerfMode::from_name(mode.name()), Some(mode));
            assert_eq!(PerfMode::from_index(mode.index()), Some(mode));
        }
        assert_eq!(PerfMode::from_name("turbo"), None);
    }

    #[test]
    fn only_default_votes_nothing_and_only_burst_polls() {
        for mode in PerfMode::ALL {
            assert_eq!(mode.dcvs_v3(7).is_none(), mode == PerfMode::Default);
            assert_eq!(mode.dcvs_v3(7).map_or(7, |d| d.contextId), 7);
            let polls = mode.rpc_polling_time() != 0;
            assert_eq!(polls, mode == PerfMode::Burst, "{mode:?}");
        }
    }
}
