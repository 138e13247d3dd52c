//! Whether a log message goes out, by era.
//!
//! Legacy: a session-wide threshold set by `logging/setLevel`; until one is set, every
//! message goes out. Modern: only a request carrying `_meta["io.modelcontextprotocol/
//! logLevel"]` gets `notifications/message`, and only at or above that level; without
//! the key it gets none at all.

use serde_json::{Value, json};

use crate::era::{self, Era, LOG_LEVEL_KEY};
use crate::wire::{INVALID_PARAMS, Output, RpcError};

/// RFC 5424 severities, least severe first.
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A log severity; greater is more severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Level(usize);

impl Level {
    pub const INFO: Level = Level(1);
    pub const ERROR: Level = Level(4);

    pub fn parse(level: &Value) -> Result<Level, RpcError> {
        level.as_str().and_then(|level| LEVELS.iter().position(|known| *known == level)).map(Level).ok_or_else(|| {
            RpcError::new(INVALID_PARAMS, format!("invalid log level {level}; expected one of {LEVELS:?}"))
        })
    }

    fn name(self) -> &'static str {
        LEVELS[self.0]
    }
}

/// The level a modern request asked for, if it asked (an invalid one is an error).
pub fn requested(params: &Value) -> Result<Option<Level>, RpcError> {
    era::meta(params).and_then(|meta| meta.get(LOG_LEVEL_KEY)).map(Level::parse).transpose()
}

/// Sends `message` at `level` if the era's rule lets it through. `session_level` is the
/// legacy session's threshold.
pub fn log(out: &Output, era: Era, params: &Value, session_level: Option<Level>, level: Level, message: &str) {
    let threshold = match era {
        Era::Legacy => session_level,
        // Validated before dispatch, so an invalid level cannot reach here.
        Era::Modern => match requested(params) {
            Ok(Some(requested)) => Some(requested),
            _ => return,
        },
    };
    if threshold.is_none_or(|threshold| level >= threshold) {
        out.notify_with("notifications/message", json!({"level": level.name(), "logger": "fakemcp", "data": message}));
    }
}
