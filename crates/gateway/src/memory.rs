//! Giving memory back to the system after many instances stopped.
//!
//! Each live instance holds some daemon memory (its pipes' buffers, its pending maps, its
//! tasks). When the reaper stops hundreds of them, all of that is freed, but the
//! allocator keeps the pages for the next burst. The `mcpx` binary allocates with
//! mimalloc (`crates/cli/src/main.rs`), which keeps a heap per thread: pages freed on a
//! thread are purged (handed back with `madvise`) only when that thread's heap is
//! collected, and a runtime worker that goes idle after the reap may not allocate again
//! for a long time. So after a large reap, `mi_collect(true)` runs on a blocking thread,
//! and each worker collects its own heap the next time it goes idle. A collect walks the
//! thread's heap, so it runs rarely (only after a large reap, once those instances are
//! gone). It must never run per request.
//!
//! In a process whose global allocator is not mimalloc (the unit tests), a collect finds
//! an empty heap and does nothing.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How many instances must have been stopped by the reaper since the last give-back
/// before the next one: each holds tens of KiB, so below this there is little to give
/// back.
pub const GIVE_BACK_AFTER_STOPPED: usize = 64;

/// Returns this thread's freed pages to the system, then has every runtime worker collect
/// its own heap the next time it goes idle (see [`on_park`]). Runs on a blocking thread of
/// the runtime.
pub fn give_back_freed(stopped: usize) {
    let started = Instant::now();
    collect();
    tracing::info!(stopped, micros = started.elapsed().as_micros() as u64, "returned freed memory to the system");
    COLLECTS_WANTED.fetch_add(1, Ordering::Relaxed);
    // An idle worker sleeps until it has work. A task for each wakes workers: tokio wakes
    // one, which wakes the next when it takes a task, and each collects its heap when it
    // parks again. One or two workers all wake; with more, the scheduler may wake fewer,
    // and a worker left asleep collects the next time it has worked.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        for _ in 0..runtime.metrics().num_workers() {
            runtime.spawn(async {});
        }
    }
}

/// Bumped by each [`give_back_freed`]: each worker collects its heap once per bump.
static COLLECTS_WANTED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COLLECTED: Cell<u64> = const { Cell::new(0) };
}

/// The runtime's `on_thread_park` hook: a worker going idle collects its heap if a reap
/// asked for it since the last time; otherwise one atomic load.
pub fn on_park() {
    let wanted = COLLECTS_WANTED.load(Ordering::Relaxed);
    if wanted == COLLECTED.get() {
        return;
    }
    COLLECTED.set(wanted);
    let started = Instant::now();
    collect();
    tracing::info!(micros = started.elapsed().as_micros() as u64, "returned a worker's freed memory to the system");
}

/// Frees what this thread's mimalloc heap holds unused and purges its free pages.
fn collect() {
    // SAFETY: mi_collect takes no pointer and only works on the calling thread's heap (and
    // segments abandoned by threads that ended); it is safe on any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
