//! After a large reap each runtime worker empties its allocator cache, so that the trim
//! after it can release the pages the cached chunks kept resident (see `memory`). One test
//! in its own binary: the allocator's figures cover the whole process.

/// Bytes the allocator counts as in use, over all arenas (cached chunks included).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn in_use() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    unsafe { libc::mallinfo2() }.uordblks
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn emptying_a_threads_cache_gives_its_chunks_back_to_the_arenas() {
    mcpx_gateway::memory::empty_thread_cache();
    // Seven chunks of every cached size, held at once and then freed on this thread: its
    // cache keeps them, and to the allocator they are still in use.
    let chunks: Vec<Vec<u8>> =
        (16..=1024).step_by(16).flat_map(|size| std::iter::repeat_n(size, 7)).map(Vec::with_capacity).collect();
    let cached_bytes: usize = chunks.iter().map(Vec::capacity).sum();
    drop(chunks);
    let cached = in_use();

    mcpx_gateway::memory::empty_thread_cache();

    let emptied = cached.saturating_sub(in_use());
    assert!(
        emptied >= cached_bytes * 9 / 10,
        "emptying the cache gave back {emptied} bytes; the cache held {cached_bytes} bytes of requests"
    );
}
