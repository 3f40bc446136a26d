//! Test-support hooks the execute path reads (cargo feature `test-support`): flags only, set
//! from [`sim_probe`](crate::sim_probe), so the execute path needs nothing of the tools layer.

/// Executes still to panic (see [`sim_probe::panic_in_next_executes`](crate::sim_probe::panic_in_next_executes)).
static PANICS_ARMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Arms the next `count` executes to panic.
pub(crate) fn arm_execute_panics(count: u64) {
    PANICS_ARMED.store(count, std::sync::atomic::Ordering::SeqCst);
}

/// Panics if [`arm_execute_panics`] armed this execute.
pub(crate) fn panic_if_armed() {
    use std::sync::atomic::Ordering::SeqCst;
    if PANICS_ARMED
        .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        panic!("test-support: a panic injected into an execute");
    }
}
