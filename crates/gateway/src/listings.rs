//! The lists each instance answered (tools, prompts, resources, resource templates), kept
//! for as long as its server allows, so a call of an exposed tool or a search does not
//! list the server again.
//!
//! Each instance keeps its own (the store lives with it in the pool): an instance another
//! caller's scope selects has other lists, and a restarted one starts empty. What is kept
//! is the server's own list; what a caller may see of it is decided for each caller after.
//!
//! A 2026-07-28 list is kept for the `ttlMs` it came with (none when 0 or absent), a
//! handshake-era one until the server says the list changed; either is dropped at once
//! when a change of its list is heard. A handshake-era list is kept only while the
//! server's notifications can be heard (see `Upstream::list_changes`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpx_protocol::shape::Cacheability;
use serde_json::Value;

/// The items of a list, shared between the store and whoever reads them.
pub(crate) type Listed = Arc<Vec<Value>>;

/// One instance's kept lists, by list method.
#[derive(Default)]
pub(crate) struct Listings {
    kept: Mutex<HashMap<String, Kept>>,
}

struct Kept {
    items: Listed,
    /// The server's `cacheScope` said `private`.
    private: bool,
    /// When the server's `ttlMs` runs out; `None` for a handshake-era list, kept until it
    /// changes.
    until: Option<Instant>,
    /// The instance's count of changes to this list when it was listed.
    changes: u64,
}

impl Listings {
    /// The kept list of `method`, if it is still fresh: listed at the change count
    /// `changes` (now), and within its lifetime. With how long a caller may keep it: what
    /// is left of the server's `ttlMs`, never longer.
    pub(crate) fn fresh(&self, method: &str, changes: Option<u64>, now: Instant) -> Option<(Listed, Cacheability)> {
        let changes = changes?;
        let kept = self.kept.lock().expect("listings lock");
        let entry = kept.get(method).filter(|k| k.changes == changes)?;
        let ttl_ms = match entry.until {
            Some(until) if until <= now => return None,
            Some(until) => u64::try_from((until - now).as_millis()).unwrap_or(u64::MAX),
            None => 0,
        };
        Some((entry.items.clone(), Cacheability { ttl_ms, private: entry.private }))
    }

    /// Keeps what `method` listed at the change count `changes` (read before it was sent),
    /// if the server allows: a 2026 list (`modern`) for its `ttlMs`, a handshake-era one
    /// until it changes. Nothing is kept when changes may go unheard (`changes` is None).
    pub(crate) fn keep(
        &self,
        method: &str,
        items: &Listed,
        cache: Cacheability,
        changes: Option<u64>,
        modern: bool,
        listed_at: Instant,
    ) {
        let Some(changes) = changes else { return };
        let until = match (modern, cache.ttl_ms) {
            (true, 0) => return,
            (true, ttl) => Some(listed_at.checked_add(Duration::from_millis(ttl)).unwrap_or(listed_at)),
            (false, _) => None,
        };
        let entry = Kept { items: items.clone(), private: cache.private, until, changes };
        self.kept.lock().expect("listings lock").insert(method.to_owned(), entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items() -> Listed {
        Arc::new(vec![json!({"name": "echo"})])
    }

    #[test]
    fn a_2026_list_is_kept_for_its_ttl_and_tells_callers_only_what_is_left() {
        let (listings, at) = (Listings::default(), Instant::now());
        listings.keep("tools/list", &items(), Cacheability { ttl_ms: 1000, private: true }, Some(3), true, at);
        let (listed, cache) = listings.fresh("tools/list", Some(3), at + Duration::from_millis(400)).unwrap();
        assert_eq!(listed, items());
        assert_eq!(cache, Cacheability { ttl_ms: 600, private: true });
        assert!(listings.fresh("tools/list", Some(3), at + Duration::from_millis(1000)).is_none(), "past its ttl");
        assert!(listings.fresh("prompts/list", Some(3), at).is_none(), "another list");
    }

    #[test]
    fn a_list_with_no_ttl_or_whose_changes_go_unheard_is_not_kept() {
        let (listings, at) = (Listings::default(), Instant::now());
        listings.keep("tools/list", &items(), Cacheability { ttl_ms: 0, private: false }, Some(0), true, at);
        assert!(listings.fresh("tools/list", Some(0), at).is_none(), "ttlMs 0 is stale at once");
        listings.keep("tools/list", &items(), Cacheability { ttl_ms: 0, private: false }, None, false, at);
        assert!(listings.fresh("tools/list", Some(0), at).is_none(), "changes could not be heard");
    }

    #[test]
    fn a_handshake_era_list_is_kept_until_a_change_is_heard() {
        let (listings, at) = (Listings::default(), Instant::now());
        listings.keep("tools/list", &items(), Cacheability { ttl_ms: 0, private: false }, Some(5), false, at);
        let later = at + Duration::from_secs(86_400);
        assert_eq!(listings.fresh("tools/list", Some(5), later).map(|f| f.1.ttl_ms), Some(0));
        assert!(listings.fresh("tools/list", Some(6), later).is_none(), "a change was heard");
        assert!(listings.fresh("tools/list", None, later).is_none(), "changes can no longer be heard");
    }
}
