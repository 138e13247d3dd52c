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

use std::time::Instant;

/// How many instances must have been stopped by the reaper since the last trim before the
/// next one: each holds tens of KiB, so below this there is little to give back.
pub const TRIM_AFTER_STOPPED: usize = 64;

/// Returns freed heap pages to the system (glibc only; elsewhere it does nothing).
pub fn give_back_freed(stopped: usize) {
    let started = Instant::now();
    let released = trim();
    tracing::info!(stopped, released, micros = started.elapsed().as_micros() as u64, "returned freed memory to the system");
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
