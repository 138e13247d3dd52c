//! Giving memory back to the system after many instances stopped.
//!
//! Each live instance holds some daemon memory (its pipes' buffers, its pending maps, its
//! tasks). When the reaper stops hundreds of them, all of that is freed, but glibc's
//! allocator keeps the pages: the free chunks sit between live ones in the heap of every
//! arena the runtime's threads used, so it neither trims the top nor unmaps them, and the
//! daemon's resident memory stays at its peak. `malloc_trim(0)` hands the whole free pages
//! of every arena back (`madvise(MADV_DONTNEED)`), so the next burst of sessions faults
//! them in again. It walks every arena under its lock, so it runs rarely (only after a
//! large reap, once those instances are gone) and on a blocking thread. It must never
//! run per request.
//!
//! The trim cannot reach each thread's own cache of free chunks (glibc's tcache: up to 7
//! chunks of each size up to 1032 bytes; to the arena they are still in use). After a
//! reap, a runtime worker's cache holds chunks from all over the heap, each keeping its
//! page resident: about 200 pages per worker, measured with 1,000 instances. So after a
//! trim each worker, the next time it goes idle, takes those chunks out of its cache and
//! frees them on a short-lived thread (a thread's cache goes back to the arenas when it
//! ends), and a trim on a thread of its own then releases their pages.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How many instances must have been stopped by the reaper since the last trim before the
/// next one: each holds tens of KiB, so below this there is little to give back.
pub const TRIM_AFTER_STOPPED: usize = 64;

/// Returns freed heap pages to the system (glibc only; elsewhere it does nothing), then
/// has every runtime worker empty its cache the next time it goes idle (see [`on_park`]).
/// Runs on a blocking thread of the runtime.
pub fn give_back_freed(stopped: usize) {
    let started = Instant::now();
    let released = trim();
    tracing::info!(
        stopped,
        released,
        micros = started.elapsed().as_micros() as u64,
        "returned freed memory to the system"
    );
    CACHES_WANTED_EMPTY.fetch_add(1, Ordering::Relaxed);
    // An idle worker sleeps until it has work. A task for each wakes workers: tokio wakes
    // one, which wakes the next when it takes a task, and each empties its cache when it
    // parks again. Two workers (two cores) both wake; with more, the scheduler may wake
    // fewer, and a worker left asleep empties its cache the next time it has worked.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        for _ in 0..runtime.metrics().num_workers() {
            runtime.spawn(async {});
        }
    }
}

/// Bumped by each [`give_back_freed`]: each thread empties its cache once per bump.
static CACHES_WANTED_EMPTY: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static CACHE_EMPTIED: Cell<u64> = const { Cell::new(0) };
}

/// The runtime's `on_thread_park` hook: a worker going idle empties its cache if a trim
/// asked for it since the last time; otherwise one atomic load.
pub fn on_park() {
    let wanted = CACHES_WANTED_EMPTY.load(Ordering::Relaxed);
    if wanted == CACHE_EMPTIED.get() {
        return;
    }
    CACHE_EMPTIED.set(wanted);
    let started = Instant::now();
    empty_thread_cache();
    // A thread that cannot start only leaves the pages resident; a panic here would take
    // the worker down.
    let _ = std::thread::Builder::new().name("mcpx-trim".into()).spawn(move || {
        let released = trim();
        tracing::info!(
            released,
            micros = started.elapsed().as_micros() as u64,
            "returned a worker's cached memory to the system"
        );
    });
}

/// How many free chunks of one size glibc's thread cache holds by default (the tunable
/// `glibc.malloc.tcache_count`).
const CACHED_PER_SIZE: usize = 7;
/// The largest request glibc's thread cache holds by default (`glibc.malloc.tcache_max`);
/// its sizes are 16 bytes apart.
const LARGEST_CACHED: usize = 1032;

/// Takes this thread's cached chunks out (a request of each cached size, as many times as
/// the cache holds) and frees them on a thread that has ended when this returns, so they
/// are back in their arenas for the next trim. With other tunables it empties less, or
/// takes a few chunks from the arenas for a moment; nothing else changes.
pub fn empty_thread_cache() {
    let taken: Vec<Vec<u8>> = (16..=LARGEST_CACHED)
        .step_by(16)
        .flat_map(|size| std::iter::repeat_n(size, CACHED_PER_SIZE))
        .map(Vec::with_capacity)
        .collect();
    if let Ok(freeing) = std::thread::Builder::new().name("mcpx-free".into()).spawn(move || drop(taken)) {
        let _ = freeing.join();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: malloc_trim only reorganises the allocator's own free lists; it takes the
    // arena locks itself and is safe to call from any thread at any time.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}
