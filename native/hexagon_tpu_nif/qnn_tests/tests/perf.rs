//! Performance votes on qnn_sim: ORT's DCVS v3 values reach `setPowerConfig`, a vote is sent
//! only when the mode changes, the vote in force can be replayed, and the power config id is
//! destroyed with the runtime's handles.

mod common;

use std::time::Duration;

use qnn::sim_probe::counters;
use qnn::{PerfConfig, PerfMode, Runtime, Site};

fn runtime_at(lib: &std::path::Path, mode: PerfMode) -> std::sync::Arc<Runtime> {
    let mut config = common::config(lib);
    config.performance = PerfConfig {
        mode,
        idle: Duration::from_secs(600),
    };
    Runtime::new(&config, &Site::here()).expect("runtime over qnn_sim")
}

#[test]
fn each_mode_sends_its_dcvs_v3_config_once() {
    let lib = common::fresh_library();
    let runtime = runtime_at(&lib, PerfMode::Default);
    assert_eq!(counters(&lib).unwrap().set_power_config_calls, 0);
    assert_eq!(counters(&lib).unwrap().live_power_config_ids, 1);
    for mode in PerfMode::ALL {
        let before = counters(&lib).unwrap().set_power_config_calls;
        runtime.set_performance(mode).unwrap();
        runtime.set_performance(mode).unwrap();
        let after = counters(&lib).unwrap();
        let state = runtime.performance();
        assert_eq!(state.voted, mode);
        match state.last_vote {
            Some(vote) => {
                assert_eq!(after.set_power_config_calls, before + 1, "{mode:?}");
                assert_eq!(Some(vote.dcvs_v3), after.last_power_config.dcvs_v3);
                assert_eq!(
                    Some(vote.dcvs_v3),
                    mode.dcvs_v3(vote.dcvs_v3.contextId),
                    "{mode:?}"
                );
            }
            // Default withdraws: no setPowerConfig.
            None => {
                assert_eq!(mode, PerfMode::Default);
                assert_eq!(after.set_power_config_calls, before);
            }
        }
    }
    drop(runtime);
    common::assert_all_freed(&lib);
    assert_eq!(counters(&lib).unwrap().live_power_config_ids, 0);
}

#[test]
fn the_vote_in_force_can_be_replayed() {
    let lib = common::fresh_library();
    let runtime = runtime_at(&lib, PerfMode::Burst);
    let vote = runtime.performance().last_vote.expect("burst voted");
    assert_eq!(vote.rpc_polling_time, 9999);
    // A later vote carried no polling time (it did not change) ...
    runtime.set_performance(PerfMode::HighPerformance).unwrap();
    runtime.set_performance(PerfMode::Burst).unwrap();
    let before = counters(&lib).unwrap();
    // ... the replay sends the whole state: the DCVS v3 config and the polling time.
    assert!(runtime.replay_performance().unwrap());
    let after = counters(&lib).unwrap();
    assert_eq!(
        after.set_power_config_calls,
        before.set_power_config_calls + 1
    );
    assert_eq!(after.last_power_config.dcvs_v3, Some(vote.dcvs_v3));
    assert_eq!(after.last_power_config.rpc_polling_time, Some(9999));

    runtime.set_performance(PerfMode::Default).unwrap();
    assert!(!runtime.replay_performance().unwrap());
}

#[test]
fn a_call_mode_is_voted_once_for_back_to_back_calls() {
    let lib = common::fresh_library();
    let runtime = runtime_at(&lib, PerfMode::PowerSaver);
    assert_eq!(counters(&lib).unwrap().set_power_config_calls, 1);
    for _ in 0..1000 {
        if runtime.performance_enter(Some(PerfMode::Burst)) {
            runtime.performance_settle();
        }
        runtime.performance_leave();
    }
    assert_eq!(counters(&lib).unwrap().set_power_config_calls, 2);
    assert_eq!(runtime.performance().voted, PerfMode::Burst);
}
