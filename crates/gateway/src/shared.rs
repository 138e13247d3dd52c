//! What the nodes of a cluster keep in its Redis besides leases: questions waiting for
//! `/v1` callers, artifacts, and the upstreams' OAuth credentials (sealed by the
//! authorizer, `mcpx_oauth::shared`: this only stores them, and the lock a node holds
//! while it spends a refresh token). Any node reads and answers them; none keeps a copy
//! of a question or an artifact.
//!
//! Whose a record is decides where it lives: every key holds a digest of its owner (the
//! caller's `Identity::owner_key`, or an artifact's session), so a node looks only among
//! that owner's records and another caller's id names nothing there. Owners and sessions
//! stay out of Redis's key names; the records themselves (a question's call and its
//! arguments, an artifact's bytes) are stored as they are, so the Redis must be as private
//! as the nodes. Each step is one script: a count and the write it permits happen together,
//! on whichever node, so a limit holds across the cluster. Nothing waits longer than
//! `cluster.redisTimeout`.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use sha2::{Digest, Sha256};

use crate::cluster::{Cluster, ClusterError};

/// Keeps a question unless the cluster already keeps `max`. KEYS: every question, the
/// owner's, the question. ARGV: member in the first, id, now ms, expiry ms, record, max,
/// lifetime ms. Returns 1, or 0 when full.
static PUT_QUESTION: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[6]) then return 0 end
redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[7])
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return 1
",
    )
});

/// The owner's questions still waiting, soonest to expire first. KEYS: the owner's. ARGV:
/// now ms, the prefix of the owner's question keys.
static QUESTIONS_OF: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  local record = redis.call('GET', ARGV[2] .. id)
  if record then table.insert(out, record) end
end
return out
",
    )
});

/// Takes a question out (once: a second taker finds nothing). KEYS: every question, the
/// owner's, the question. ARGV: member in the first, id.
static TAKE_QUESTION: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local record = redis.call('GET', KEYS[3])
redis.call('DEL', KEYS[3])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return record
",
    )
});

/// Questions waiting in the whole cluster. KEYS: every question. ARGV: now ms.
static QUESTIONS_WAITING: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return redis.call('ZCARD', KEYS[1])
",
    )
});

const ALL_QUESTIONS: &str = "mcpx:questions";

/// Keeps an artifact unless its session would go past its quota, after dropping the
/// session's expired ones. KEYS: the session's records, the artifact's bytes. ARGV: id,
/// record, bytes, what it takes (bytes and record), quota, now s, max age s, the prefix of
/// the session's byte keys, max age ms. Returns {1, used} or {0, used}: bytes the session's
/// other artifacts take.
static PUT_ARTIFACT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local used = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local id, record = fields[i], fields[i + 1]
  local ok, r = pcall(cjson.decode, record)
  if not ok or tonumber(r.created) + tonumber(ARGV[7]) < tonumber(ARGV[6]) then
    redis.call('HDEL', KEYS[1], id)
    redis.call('DEL', ARGV[8] .. id)
  elseif id ~= ARGV[1] then
    used = used + tonumber(r.size) + #record
  end
end
if used + tonumber(ARGV[4]) > tonumber(ARGV[5]) then return {0, used} end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[9])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[9])
return {1, used}
",
    )
});

/// An artifact's record and bytes. KEYS: the session's records, the artifact's bytes. ARGV: id.
static GET_ARTIFACT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local record = redis.call('HGET', KEYS[1], ARGV[1])
if not record then return false end
local data = redis.call('GET', KEYS[2])
if not data then return false end
return {record, data}
",
    )
});

/// Deletes an artifact; 1 when the session had it. KEYS: the session's records, its bytes. ARGV: id.
static REMOVE_ARTIFACT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return removed
",
    )
});

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
        let mut invocation = PUT_QUESTION.prepare_invoke();
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
        let mut invocation = QUESTIONS_OF.prepare_invoke();
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
        let mut invocation = TAKE_QUESTION.prepare_invoke();
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
        let mut invocation = QUESTIONS_WAITING.prepare_invoke();
        invocation.key(ALL_QUESTIONS).arg(crate::ask::now_ms());
        let mut redis = self.redis.clone();
        self.timed(invocation.invoke_async(&mut redis)).await
    }
}

/// What a session's new artifact came to.
pub(crate) enum Kept {
    Yes,
    /// Past the quota: the bytes the session's other artifacts take.
    OverQuota(u64),
}

impl Cluster {
    /// Keeps artifact `id` (its `record` and `data`, `needs` bytes together) for `session`
    /// unless that takes the session past `quota`, counting the session's artifacts on
    /// every node; each lasts `max_age`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn put_artifact(
        &self,
        session: &str,
        id: &str,
        record: &str,
        data: &[u8],
        needs: u64,
        quota: u64,
        max_age: Duration,
    ) -> Result<Kept, ClusterError> {
        let session = digest(session);
        let now = crate::ask::now_ms() / 1000;
        let mut invocation = PUT_ARTIFACT.prepare_invoke();
        invocation
            .key(format!("mcpx:artifacts:{session}"))
            .key(format!("mcpx:artifact:{session}:{id}"))
            .arg(id)
            .arg(record)
            .arg(data)
            .arg(needs)
            .arg(quota)
            .arg(now)
            .arg(max_age.as_secs())
            .arg(format!("mcpx:artifact:{session}:"))
            .arg(max_age.as_millis().max(1) as u64);
        let mut redis = self.redis.clone();
        let (kept, used): (i64, u64) = self.timed(invocation.invoke_async(&mut redis)).await?;
        Ok(if kept == 1 { Kept::Yes } else { Kept::OverQuota(used) })
    }

    /// The records of `session`'s artifacts, by id (expired ones included: the caller
    /// filters them).
    pub(crate) async fn artifact_records(&self, session: &str) -> Result<Vec<(String, String)>, ClusterError> {
        let mut redis = self.redis.clone();
        let key = format!("mcpx:artifacts:{}", digest(session));
        self.timed(redis::cmd("HGETALL").arg(key).query_async(&mut redis)).await
    }

    /// `session`'s artifact `id`: its record and bytes.
    pub(crate) async fn artifact(&self, session: &str, id: &str) -> Result<Option<(String, Vec<u8>)>, ClusterError> {
        let session = digest(session);
        let mut invocation = GET_ARTIFACT.prepare_invoke();
        invocation.key(format!("mcpx:artifacts:{session}")).key(format!("mcpx:artifact:{session}:{id}")).arg(id);
        let mut redis = self.redis.clone();
        self.timed(invocation.invoke_async(&mut redis)).await
    }

    /// Deletes `session`'s artifact `id`; false when it had none by that id.
    pub(crate) async fn remove_artifact(&self, session: &str, id: &str) -> Result<bool, ClusterError> {
        let session = digest(session);
        let mut invocation = REMOVE_ARTIFACT.prepare_invoke();
        invocation.key(format!("mcpx:artifacts:{session}")).key(format!("mcpx:artifact:{session}:{id}")).arg(id);
        let mut redis = self.redis.clone();
        let removed: i64 = self.timed(invocation.invoke_async(&mut redis)).await?;
        Ok(removed == 1)
    }
}

/// A digest for a Redis key name: owners and sessions stay out of Redis's key space.
pub(crate) fn digest(owner: &str) -> String {
    Sha256::digest(owner.as_bytes())[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a credential only while the writer holds its lock. KEYS: the credential, the
/// lock. ARGV: the value, the lock's value.
static PUT_HELD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
",
    )
});

/// The next number of a counter, raised to a floor first when it is below it. KEYS: the
/// counter. ARGV: the floor.
static NEXT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local next = redis.call('INCR', KEYS[1])
local floor = tonumber(ARGV[1])
if next < floor then
  redis.call('SET', KEYS[1], ARGV[1])
  return floor
end
return next
",
    )
});

/// Writes a value and starts its counter, only if neither exists. KEYS: the value, the
/// counter. ARGV: the value, the counter's first number.
static PUT_FIRST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1
",
    )
});

/// Frees a lock only if it still holds the value written. KEYS: the lock. ARGV: the value.
static UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
",
    )
});

/// The cluster's Redis as the store of the OAuth credentials every node shares, under
/// `mcpx:<name>` (names are digests). No expiry: a credential lives until a logout or a
/// refused refresh; a lock lives until freed, or its ttl.
pub(crate) struct Credentials(pub std::sync::Arc<Cluster>);

impl mcpx_oauth::shared::SharedStore for Credentials {
    fn get<'a>(&'a self, name: &'a str) -> mcpx_oauth::shared::Pending<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            // Read before every request to an upstream: while Redis is known down, the
            // request goes on at once with this node's copy instead of waiting for it.
            if let Some(down) = self.0.redis_down() {
                return Err(down);
            }
            let mut redis = self.0.redis.clone();
            let mut command = redis::cmd("GET");
            command.arg(format!("mcpx:{name}"));
            self.0.timed(command.query_async(&mut redis)).await.map_err(|e| e.to_string())
        })
    }

    fn put<'a>(
        &'a self,
        name: &'a str,
        value: Vec<u8>,
        lock: Option<(&'a str, &'a str)>,
    ) -> mcpx_oauth::shared::Pending<'a, bool> {
        Box::pin(async move {
            let mut redis = self.0.redis.clone();
            let written: i64 = match lock {
                Some((lock, held)) => {
                    let mut invocation = PUT_HELD.prepare_invoke();
                    invocation.key(format!("mcpx:{name}")).key(format!("mcpx:{lock}")).arg(value).arg(held);
                    self.0.timed(invocation.invoke_async(&mut redis)).await
                }
                None => {
                    let mut command = redis::cmd("SET");
                    command.arg(format!("mcpx:{name}")).arg(value);
                    self.0.timed(command.query_async::<()>(&mut redis)).await.map(|()| 1)
                }
            }
            .map_err(|e| e.to_string())?;
            Ok(written == 1)
        })
    }

    fn delete<'a>(&'a self, name: &'a str) -> mcpx_oauth::shared::Pending<'a, ()> {
        Box::pin(async move {
            let mut redis = self.0.redis.clone();
            let mut command = redis::cmd("DEL");
            command.arg(format!("mcpx:{name}"));
            self.0.timed(command.query_async::<i64>(&mut redis)).await.map(|_| ()).map_err(|e| e.to_string())
        })
    }

    fn lock<'a>(&'a self, name: &'a str, value: &'a str, ttl: Duration) -> mcpx_oauth::shared::Pending<'a, bool> {
        Box::pin(async move {
            let mut redis = self.0.redis.clone();
            let mut command = redis::cmd("SET");
            command.arg(format!("mcpx:{name}")).arg(value).arg("NX").arg("PX").arg(ttl.as_millis() as u64);
            let set = self.0.timed(command.query_async::<Option<String>>(&mut redis)).await;
            set.map(|set| set.is_some()).map_err(|e| e.to_string())
        })
    }

    fn unlock<'a>(&'a self, name: &'a str, value: &'a str) -> mcpx_oauth::shared::Pending<'a, ()> {
        Box::pin(async move {
            let mut redis = self.0.redis.clone();
            let mut invocation = UNLOCK.prepare_invoke();
            invocation.key(format!("mcpx:{name}")).arg(value);
            self.0.timed(invocation.invoke_async::<i64>(&mut redis)).await.map(|_| ()).map_err(|e| e.to_string())
        })
    }

    fn next<'a>(&'a self, name: &'a str, floor: u64) -> mcpx_oauth::shared::Pending<'a, u64> {
        Box::pin(async move {
            let mut redis = self.0.redis.clone();
            let mut invocation = NEXT.prepare_invoke();
            invocation.key(format!("mcpx:{name}")).arg(floor);
            self.0.timed(invocation.invoke_async::<u64>(&mut redis)).await.map_err(|e| e.to_string())
        })
    }

    fn put_first<'a>(
        &'a self,
        name: &'a str,
        counter: &'a str,
        value: Vec<u8>,
        first: u64,
    ) -> mcpx_oauth::shared::Pending<'a, bool> {
        Box::pin(async move {
            let mut redis = self.0.redis.clone();
            let mut invocation = PUT_FIRST.prepare_invoke();
            invocation.key(format!("mcpx:{name}")).key(format!("mcpx:{counter}")).arg(value).arg(first);
            let written = self.0.timed(invocation.invoke_async::<i64>(&mut redis)).await;
            written.map(|w| w == 1).map_err(|e| e.to_string())
        })
    }
}
