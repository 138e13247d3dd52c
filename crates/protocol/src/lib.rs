//! The MCP wire model, as mcpx sees it.
//!
//! Frames stay `serde_json::Value` (with `preserve_order`) so that fields mcpx does not own
//! survive a round trip untouched; this crate only names the parts mcpx reads or rewrites:
//! revisions and eras, the reserved `_meta` keys, error codes, and how a result is shaped
//! for the revision of the caller that receives it.
//!
//! Pure data: no I/O, no async, nothing that knows about upstreams or sessions.

pub mod dropped;
pub mod error;
pub mod header;
pub mod message;
pub mod meta;
pub mod param_headers;
pub mod revision;
pub mod shape;

pub use error::{RpcError, code};
pub use message::{Message, RequestId};
pub use revision::{Era, Revision};
