//! What the nodes of a cluster keep in its Redis besides leases: questions waiting for
//! `/v1` callers, and artifacts. Any node reads and answers them; none keeps a copy.
//!
//! Whose a record is decides where it lives: every key holds a digest of its owner (the
//! caller's `Identity::owner_key`, or an artifact's session), so a node looks only among
//! that owner's records and another caller's id names nothing there. Owners and sessions
//! stay out of Redis's key names; the records themselves (a question's call and its
//! arguments, an artifact's bytes) are stored as they are, so the Redis must be as private
//! as the nodes. Each step is one script: a count and the write it permits happen together,
//! on whichever node, so a limit holds across the cluster. Nothing waits longer than
//! `cluster.redisTimeout`.

use std::collections::HashMap;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::cluster::{Cluster, ClusterError};

/// Keeps a question unless the cluster already keeps `max`. KEYS: every question, the
/// owner's, the question. ARGV: member in the first, id, now ms, expiry ms, record, max,
/// lifetime ms. Returns 1, or 0 when full.
const PUT_QUESTION: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[6]) then return 0 end
redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[7])
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return 1
";

/// The owner's questions still waiting, soonest to expire first. KEYS: the owner's. ARGV:
/// now ms, the prefix of the owner's question keys.
const QUESTIONS_OF: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  local record = redis.call('GET', ARGV[2] .. id)
  if record then table.insert(out, record) end
end
return out
";

/// Takes a question out (once: a second taker finds nothing). KEYS: every question, the
/// owner's, the question. ARGV: member in the first, id.
const TAKE_QUESTION: &str = r"
local record = redis.call('GET', KEYS[3])
redis.call('DEL', KEYS[3])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return record
";

/// Questions waiting in the whole cluster. KEYS: every question. ARGV: now ms.
const QUESTIONS_WAITING: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return redis.call('ZCARD', KEYS[1])
";

const ALL_QUESTIONS: &str = "mcpx:questions";

/// Each script once: its digest is computed when first used, then Redis caches it by that.
fn script(source: &'static str) -> &'static redis::Script {
    static SCRIPTS: std::sync::LazyLock<std::sync::Mutex<HashMap<usize, &'static redis::Script>>> =
        std::sync::LazyLock::new(Default::default);
    let mut scripts = SCRIPTS.lock().expect("scripts lock");
    scripts.entry(source.as_ptr() as usize).or_insert_with(|| Box::leak(Box::new(redis::Script::new(source))))
}

impl Cluster {
    /// Keeps question `id` (its `record`) for `owner` until `lifetime` has passed; false
    /// when the cluster keeps `max` already.
    pub async fn put_question(
        &self,
        owner: &str,
        id: &str,
        record: &str,
        lifetime: Duration,
        max: usize,
    ) -> Result<bool, ClusterError> {
        let owner = digest(owner);
        let now = crate::ask::now_ms();
        let mut invocation = script(PUT_QUESTION).prepare_invoke();
        invocation
            .key(ALL_QUESTIONS)
            .key(format!("mcpx:questions:{owner}"))
            .key(format!("mcpx:question:{owner}:{id}"))
            .arg(format!("{owner}:{id}"))
            .arg(id)
            .arg(now)
            .arg(now + lifetime.as_millis() as u64)
            .arg(record)
            .arg(max)
            .arg(lifetime.as_millis().max(1) as u64);
        let mut redis = self.redis.clone();
        let kept: i64 = self.timed(invocation.invoke_async(&mut redis)).await?;
        Ok(kept == 1)
    }

    /// The records of `owner`'s questions still waiting, soonest to expire first.
    pub async fn questions_of(&self, owner: &str) -> Result<Vec<String>, ClusterError> {
        let owner = digest(owner);
        let mut invocation = script(QUESTIONS_OF).prepare_invoke();
        invocation
            .key(format!("mcpx:questions:{owner}"))
            .arg(crate::ask::now_ms())
            .arg(format!("mcpx:question:{owner}:"));
        let mut redis = self.redis.clone();
        self.timed(invocation.invoke_async(&mut redis)).await
    }

    /// Takes `owner`'s question `id` out, to answer or abandon it; `None` when `owner` has
    /// no such question (another caller's id included).
    pub async fn take_question(&self, owner: &str, id: &str) -> Result<Option<String>, ClusterError> {
        let owner = digest(owner);
        let mut invocation = script(TAKE_QUESTION).prepare_invoke();
        invocation
            .key(ALL_QUESTIONS)
            .key(format!("mcpx:questions:{owner}"))
            .key(format!("mcpx:question:{owner}:{id}"))
            .arg(format!("{owner}:{id}"))
            .arg(id);
        let mut redis = self.redis.clone();
        self.timed(invocation.invoke_async(&mut redis)).await
    }

    /// Questions waiting in the whole cluster.
    pub async fn questions_waiting(&self) -> Result<usize, ClusterError> {
        let mut invocation = script(QUESTIONS_WAITING).prepare_invoke();
        invocation.key(ALL_QUESTIONS).arg(crate::ask::now_ms());
        let mut redis = self.redis.clone();
        self.timed(invocation.invoke_async(&mut redis)).await
    }
}

/// A digest for a Redis key name: owners and sessions stay out of Redis's key space.
pub(crate) fn digest(owner: &str) -> String {
    Sha256::digest(owner.as_bytes())[..16].iter().map(|b| format!("{b:02x}")).collect()
}
