//! Per-model fault injection: execute failures, sleeps, context-creation failures.

mod common;
mod models;

use std::time::{Duration, Instant};

use common::*;
use models::*;
use qnn_sim::builder::ModelBuilder;
use qnn_sim::model::{Fault, FaultScope};
use qnn_sys::*;

/// Runs `n` executes on a fresh context of `b`, returning each result's code (0 = ok).
fn codes(sim: &Sim, bytes: &[u8], n: usize) -> Vec<u32> {
    let s = sim.open();
    let ctx = sim.create_context(&s, bytes).unwrap();
    let g = sim.retrieve(ctx, "g").unwrap();
    let x = f32_bytes(&[1.0]);
    let r = (0..n)
        .map(|_| sim.execute(bytes, g, "g", &[&x]).err().unwrap_or(0))
        .collect();
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
    r
}

fn model(f: Fault) -> Vec<u8> {
    identity_f32("g", 1).fail_execute(f).build().unwrap()
}

#[test]
fn once_after_always_times() {
    let sim = Sim::load();
    let c = QNN_COMMON_ERROR_SYSTEM_COMMUNICATION;
    assert_eq!(codes(&sim, &model(Fault::once(c)), 3), [c, 0, 0]);
    assert_eq!(codes(&sim, &model(Fault::after(c, 2)), 4), [0, 0, c, c]);
    assert_eq!(codes(&sim, &model(Fault::always(6033)), 2), [6033, 6033]);
    let f = Fault {
        times: Some(2),
        ..Fault::after(c, 1)
    };
    assert_eq!(codes(&sim, &model(f), 5), [0, c, c, 0, 0]);
    assert_eq!(sim.live(), 0);
    assert_eq!(sim.executes(), 14);
}

#[test]
fn scope_library_survives_context_recreation_scope_context_does_not() {
    let sim = Sim::load();
    let c = QNN_COMMON_ERROR_SYSTEM_COMMUNICATION;
    let lib = model(Fault::once(c));
    assert_eq!(codes(&sim, &lib, 1), [c]);
    assert_eq!(
        codes(&sim, &lib, 1),
        [0],
        "a recreated context does not fail again"
    );
    let ctx = model(Fault {
        scope: FaultScope::Context,
        ..Fault::once(c)
    });
    assert_eq!(codes(&sim, &ctx, 2), [c, 0]);
    assert_eq!(codes(&sim, &ctx, 2), [c, 0]);
}

#[test]
fn fault_restricted_to_one_graph() {
    let sim = Sim::load();
    let bytes = identity_into(identity_f32("g", 1), "h", 1)
        .fail_execute(Fault {
            graph: Some("h".into()),
            ..Fault::always(6031)
        })
        .build()
        .unwrap();
    assert_eq!(codes(&sim, &bytes, 2), [0, 0]);
    let s = sim.open();
    let ctx = sim.create_context(&s, &bytes).unwrap();
    let h = sim.retrieve(ctx, "h").unwrap();
    assert_eq!(
        sim.execute(&bytes, h, "h", &[&f32_bytes(&[1.0])]),
        Err(6031)
    );
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
}

#[test]
fn sleep_in_execute() {
    let sim = Sim::load();
    let bytes = identity_f32("g", 1).sleep_ms(60).build().unwrap();
    let t = Instant::now();
    assert_eq!(codes(&sim, &bytes, 2), [0, 0]);
    assert!(t.elapsed() >= Duration::from_millis(120));
}

#[test]
fn context_creation_fault() {
    let sim = Sim::load();
    let bytes = identity_f32("g", 1)
        .fail_context_create(Fault::once(QNN_COMMON_ERROR_SYSTEM_COMMUNICATION))
        .build()
        .unwrap();
    let s = sim.open();
    assert_eq!(
        sim.create_context(&s, &bytes).unwrap_err(),
        QNN_COMMON_ERROR_SYSTEM_COMMUNICATION
    );
    let ctx = sim.create_context(&s, &bytes).unwrap();
    assert_eq!(sim.free_context(ctx), 0);
    sim.close(s);
    assert_eq!(sim.live(), 0);
}

#[test]
fn fault_codes_are_validated() {
    assert!(
        identity_f32("g", 1)
            .fail_execute(Fault::once(0))
            .build()
            .is_err()
    );
    assert!(
        ModelBuilder::new()
            .fail_execute(Fault::once(70000))
            .build()
            .is_err()
    );
}
