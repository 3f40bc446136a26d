//! A global allocator that counts this thread's allocations, for tests that show a path
//! allocates nothing (the log callback's refusal, the trace when off). A test binary installs
//! it with `#[global_allocator]` and reads [`allocations`] around the code it measures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting each allocation of the calling thread.
pub struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: defers to the system allocator; the count is a thread-local `Cell` with no
// destructor, which allocates nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The calling thread's allocations so far (while [`CountingAllocator`] is the global one).
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}
