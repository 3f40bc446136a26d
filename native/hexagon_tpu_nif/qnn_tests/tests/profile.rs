//! Profiling on qnn_sim through the `qnn` crate: an asked-for profile, sampling, and the
//! handles' lifetime (each library copy is the test's own, so its counters are exact).

mod common;

use common::*;
use qnn::profile::{Level, Unit};
use qnn_sim::model::TensorSpec;

/// identity: op code 1, output of 4 elements: 500 + 4 cycles (qnn_sim's README, "Profiles").
const CYCLES: u64 = 504;

#[test]
fn an_asked_profile_is_read_and_the_handle_freed_with_the_graph() {
    let (lib, runtime) = runtime();
    let (context, graph) = load(&runtime, &identity_model(TensorSpec::f32([1, 4])));
    let x = f32_bytes(&[1.0, 2.0, 3.0, 4.0]);
    let mut y = vec![0u8; 16];

    let (_, profile) = graph.with_turn(|turn| {
        turn.execute_profiled(&[&x], &mut [&mut y], Some(Level::Detailed))
            .unwrap()
    });
    let profile = profile.expect("a profile");
    assert_eq!(profile.accelerator_cycles, Some(CYCLES));
    assert_eq!(profile.accelerator_us, Some(1));
    assert_eq!(profile.ops.len(), 1);
    assert_eq!(profile.ops[0].name, "y");
    assert_eq!(profile.ops[0].cycles, Some(CYCLES));
    assert_eq!(profile.events[2].unit, Unit::Cycles);
    assert_eq!(profile.events[2].sub_events[0].kind_name(), Some("node"));

    // Not asked again: no profile, and no second handle.
    let (_, profile) = graph
        .with_turn(|turn| turn.execute_profiled(&[&x], &mut [&mut y], None))
        .unwrap();
    assert_eq!(profile, None);
    assert_eq!(qnn::sim_probe::profiles_created(&lib).unwrap(), 1);
    assert_eq!(qnn::sim_probe::profiles_live(&lib).unwrap(), 1);

    graph.close().unwrap();
    assert!(qnn::counters::settle(std::time::Duration::from_secs(10)));
    assert_eq!(qnn::sim_probe::profiles_live(&lib).unwrap(), 0);
    drop((graph, context, runtime));
    assert_all_freed(&lib);
}

#[test]
fn sampling_one_in_three() {
    let (lib, runtime) = runtime();
    let (_context, graph) = load(&runtime, &identity_model(TensorSpec::f32([1, 4])));
    graph.set_profile_every(Some(3)).unwrap();
    assert_eq!(qnn::sim_probe::profiles_created(&lib).unwrap(), 1);
    let x = f32_bytes(&[1.0, 2.0, 3.0, 4.0]);
    let mut y = vec![0u8; 16];
    for _ in 0..7 {
        graph.execute(&[&x], &mut [&mut y]).unwrap();
    }
    let table = graph.profile_table();
    assert_eq!((table.every, table.samples), (3, 3));
    let row = table.ops["y"];
    assert_eq!(
        (row.total_cycles, row.samples, row.max_cycles),
        (3 * CYCLES, 3, CYCLES)
    );
    assert_eq!(qnn::sim_probe::profiles_created(&lib).unwrap(), 1);
}

#[test]
fn a_backend_without_profile_functions_refuses_by_name() {
    let lib = fresh_library();
    qnn::sim_probe::configure(&lib, "null_entries", "profileCreate").unwrap();
    let runtime = qnn::Runtime::new(&config(&lib), &qnn::Site::here()).unwrap();
    let (_context, graph) = load(&runtime, &identity_model(TensorSpec::f32([1, 4])));
    let error = graph.set_profile_every(Some(2)).unwrap_err();
    assert!(
        error.to_string().contains("no QnnProfile functions"),
        "{error}"
    );
}
