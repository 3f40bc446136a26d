//! Profiling an execute: a QnnProfile handle attached to `graphExecute`, and what the backend
//! reported read back into a typed [`Profile`].
//!
//! A profile handle belongs to the backend (`QnnProfile_create` takes the backend handle), so it
//! is created and freed on the runtime's owner thread, like the backend itself (ONNX Runtime's
//! QNN EP likewise creates its one profile handle where it creates the backend, and uses it from
//! the threads that run the session). A graph keeps at most one handle per [`Level`], created
//! the first time that level is asked for and reused by every later profiled execute of the
//! graph (only the holder of the graph's turn executes, so a handle is never used twice at
//! once); the events are read right after each execute. The handles are freed, on the owner
//! thread, when the graph is closed or dropped, and not at all once exit has begun.
//!
//! Two ways to profile:
//! - **asked**: [`Turn::execute_profiled`](crate::Turn::execute_profiled) with a level; the
//!   first execute at a level on a graph waits for the runtime's thread to create the handle;
//! - **sampled**: [`Graph::set_profile_every`](crate::Graph::set_profile_every) creates the
//!   detailed handle there and then profiles one execute in N, never waiting for anything, and
//!   adds each sample's per-op cycles to the graph's [`OpTable`].
//!
//! With neither, an execute passes a NULL profile: no handle exists, nothing is read
//! (`profiles_created` in [`mod@crate::counters`] stays where it was).

mod handle;
mod reader;
mod sampler;
mod types;

pub(crate) use sampler::Profiler;
pub use types::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: u32, unit: u32, value: u64, identifier: &str, subs: Vec<Event>) -> Event {
        Event {
            kind,
            unit: Unit::from_raw(unit),
            value,
            identifier: identifier.into(),
            timestamp_us: None,
            sub_events: subs,
        }
    }

    #[test]
    fn a_detailed_profile_is_typed() {
        let node = |name, unit, value| event(404, unit, value, name, vec![]);
        assert_eq!(op_name("n0_token_1:OpId_25 (cycles)"), "n0_token_1:OpId_25");
        assert_eq!(op_name("Input OpId_2"), "Input OpId_2");
        let events = vec![
            event(400, 1, 900, "", vec![]),
            event(3001, 1, 800, "", vec![]),
            event(
                3003,
                3,
                5000,
                "",
                vec![node("conv", 3, 3000), node("relu", 3, 2000)],
            ),
            event(3004, 1, 5, "", vec![node("conv", 1, 3), node("relu", 1, 2)]),
            event(3010, 1, 7, "", vec![]),
        ];
        let p = Profile::from_events(Level::Detailed, false, events);
        assert_eq!(p.execute_us, Some(900));
        assert_eq!(p.host_rpc_us, Some(800));
        assert_eq!(p.accelerator_cycles, Some(5000));
        assert_eq!(p.accelerator_us, Some(5));
        assert_eq!(p.vtcm_acquire_us, Some(7));
        assert_eq!(p.resource_power_up_us, None);
        assert_eq!(
            p.ops,
            vec![
                OpProfile {
                    name: "conv".into(),
                    cycles: Some(3000),
                    us: Some(3)
                },
                OpProfile {
                    name: "relu".into(),
                    cycles: Some(2000),
                    us: Some(2)
                },
            ]
        );
        let mut table = OpTable::default();
        table.add(&p);
        table.add(&p);
        assert_eq!(table.samples, 2);
        assert_eq!(
            table.ops["conv"],
            OpTotals {
                total_cycles: 6000,
                samples: 2,
                max_cycles: 3000
            }
        );
    }
}
