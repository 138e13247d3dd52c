//! What can go wrong while the gateway answers a request, as values. A front end turns
//! one into the JSON-RPC error its caller receives (`RpcError::from`), in one place; the
//! gateway itself never builds a wire error for its caller.

use mcpx_protocol::{RpcError, code};
use mcpx_upstream::UpstreamError;
use serde_json::{Value, json};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request's params are wrong (`-32602`); `data` names what exists, where that helps.
    #[error("{message}")]
    Params { message: String, data: Option<Value> },
    /// No method of this name here.
    #[error("method not found: {0}")]
    NoMethod(String),
    /// No server offers this resource.
    #[error("resource not found: {0}")]
    NoResource(String),
    /// A limit refused the request; `setting` names it.
    #[error("{message}")]
    Limit { message: String, setting: &'static str, limit: usize },
    /// Two servers offer one name and the config shows both unprefixed.
    #[error(
        "{kind} {name:?} is offered by both {:?} and {:?}: set \"exposePrefix\" to \"always\" (or expose one of them)",
        servers[0],
        servers[1]
    )]
    Clash { kind: String, name: String, servers: [String; 2] },
    /// An `Mcp-Param-*` header disagrees with the argument it mirrors.
    #[error("{0}")]
    HeaderMismatch(String),
    /// The other side answered with an error of its own (an upstream, or the caller to a
    /// question put to it): relayed as it is.
    #[error("{}", .0.message)]
    Relayed(RpcError),
    /// The upstream could not be started, reached or understood, or did not answer in time.
    #[error(transparent)]
    Upstream(UpstreamError),
    /// Something on mcpx's own side failed.
    #[error("{0}")]
    Internal(String),
    /// Another node of the cluster serves the instance, and this request cannot be sent
    /// there (it is not one a node relays, or another node relayed it here).
    #[error(
        "instance {} is served by cluster node {:?}; this request reached another node and cannot be forwarded from here: send it again",
        .0.key,
        .0.node
    )]
    Elsewhere(Box<Elsewhere>),
    /// The policy (a server's `tools`/`prompts`/`resources`, the caller's `clients` entry)
    /// hides what the request names. The caller gets exactly the error for something that
    /// does not exist (the one inside), so it learns nothing of what is hidden.
    #[error(transparent)]
    Hidden(Box<Error>),
    /// The caller's client made more requests than its token bucket allows; `setting`
    /// names the rate that applies (`limits.rate`, `clients.<client>.limits.rate`).
    #[error("{message}")]
    Rate { message: String, setting: String, per_second: f64, burst: u32 },
}

/// Where another node of the cluster serves an instance: that node (its id and the URL
/// the other nodes reach it at) and the instance's key.
#[derive(Debug)]
pub struct Elsewhere {
    pub node: String,
    pub url: String,
    pub key: crate::scope::InstanceKey,
}

impl Error {
    pub fn params(message: impl Into<String>) -> Error {
        Error::Params { message: message.into(), data: None }
    }

    /// What exists, for the caller to correct its params with (a params error only).
    pub fn with_data(self, data: Value) -> Error {
        match self {
            Error::Params { message, .. } => Error::Params { message, data: Some(data) },
            other => other,
        }
    }

    pub fn internal(message: impl Into<String>) -> Error {
        Error::Internal(message.into())
    }

    /// Why mcpx refused the request itself, for a record of outcomes: `"policy"` (hidden
    /// by the tool policy or the caller's access), `"limit"` (a limit or the rate), or
    /// none when it was not refused.
    pub fn refusal(&self) -> Option<&'static str> {
        match self {
            Error::Hidden(_) => Some("policy"),
            Error::Limit { .. } | Error::Rate { .. } => Some("limit"),
            _ => None,
        }
    }

    /// Whether an upstream refused for want of a login only a person can give.
    pub fn is_login_needed(&self) -> bool {
        matches!(self, Error::Upstream(UpstreamError::LoginNeeded { .. }))
    }

    /// The JSON-RPC error code the caller will see.
    pub fn code(&self) -> i64 {
        match self {
            Error::Params { .. } => code::INVALID_PARAMS,
            Error::NoMethod(_) => code::METHOD_NOT_FOUND,
            Error::NoResource(_) => code::LEGACY_RESOURCE_NOT_FOUND,
            Error::HeaderMismatch(_) => code::HEADER_MISMATCH,
            Error::Relayed(e) => e.code,
            Error::Hidden(e) => e.code(),
            Error::Limit { .. }
            | Error::Rate { .. }
            | Error::Clash { .. }
            | Error::Upstream(_)
            | Error::Internal(_)
            | Error::Elsewhere(_) => code::INTERNAL_ERROR,
        }
    }
}

impl From<UpstreamError> for Error {
    fn from(e: UpstreamError) -> Error {
        match e {
            UpstreamError::Rpc(e) => Error::Relayed(e),
            other => Error::Upstream(other),
        }
    }
}

impl From<Error> for RpcError {
    fn from(e: Error) -> RpcError {
        match e {
            Error::Relayed(e) => e,
            Error::Hidden(e) => RpcError::from(*e),
            Error::Upstream(e) => e.to_rpc(),
            other => {
                let wire = RpcError::new(other.code(), other.to_string());
                match other.into_data() {
                    Some(data) => wire.with_data(data),
                    None => wire,
                }
            }
        }
    }
}

impl Error {
    /// What the caller gets beside the message to act on: what exists, which limit.
    fn into_data(self) -> Option<Value> {
        match self {
            Error::Params { data, .. } => data,
            Error::NoResource(uri) => Some(json!({ "uri": uri })),
            Error::Limit { setting, limit, .. } => Some(json!({ "limit": limit, "setting": setting })),
            Error::Rate { setting, per_second, burst, .. } => {
                Some(json!({ "setting": setting, "perSecond": per_second, "burst": burst }))
            }
            Error::Clash { name, servers, .. } => Some(json!({ "name": name, "servers": servers })),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_reaches_the_caller_with_its_code_and_the_data_that_helps() {
        let cases = [
            (Error::params("unknown server \"x\"").with_data(json!({ "servers": ["a"] })), -32602),
            (Error::NoMethod("x/y".into()), -32601),
            (Error::NoResource("file:///x".into()), -32002),
            (Error::Limit { message: "busy".into(), setting: "limits.maxCallsPerClient", limit: 4 }, -32603),
            (Error::HeaderMismatch("Mcp-Param-Region".into()), -32020),
            (Error::Relayed(RpcError::new(-32042, "upstream's own")), -32042),
            (Error::internal("broken"), -32603),
        ];
        for (error, code) in cases {
            assert_eq!(error.code(), code, "{error}");
            let message = error.to_string();
            let wire = RpcError::from(error);
            assert_eq!(wire.code, code);
            assert!(wire.message.contains(message.trim_start_matches("resource not found: ")), "{wire:?}");
        }
        let limit = RpcError::from(Error::Limit { message: "busy".into(), setting: "exec.maxConcurrent", limit: 2 });
        assert_eq!(limit.data, Some(json!({ "limit": 2, "setting": "exec.maxConcurrent" })));
        assert_eq!(RpcError::from(Error::NoResource("u".into())).data, Some(json!({ "uri": "u" })));
    }

    #[test]
    fn a_hidden_item_reaches_the_caller_as_the_unknown_one_and_is_classed_as_policy() {
        let unknown = || Error::params("unknown tool \"x\"").with_data(json!({ "tools": ["a"] }));
        let hidden = Error::Hidden(Box::new(unknown()));
        assert_eq!(hidden.refusal(), Some("policy"));
        assert_eq!(unknown().refusal(), None);
        assert_eq!(hidden.code(), unknown().code());
        assert_eq!(RpcError::from(hidden), RpcError::from(unknown()));
        let rate =
            Error::Rate { message: "slow down".into(), setting: "limits.rate".into(), per_second: 2.0, burst: 3 };
        assert_eq!(rate.refusal(), Some("limit"));
        let wire = RpcError::from(rate);
        assert_eq!(wire.code, -32603);
        assert_eq!(wire.data, Some(json!({ "setting": "limits.rate", "perSecond": 2.0, "burst": 3 })));
    }

    #[test]
    fn an_upstreams_own_error_is_relayed_as_it_is_and_a_failure_to_reach_it_is_internal() {
        let own = RpcError::new(-32001, "no such thing").with_data(json!({ "x": 1 }));
        assert_eq!(RpcError::from(Error::from(UpstreamError::Rpc(own.clone()))), own);
        let timeout = UpstreamError::Timeout {
            server: "s".into(),
            method: "tools/call".into(),
            after: std::time::Duration::from_secs(1),
        };
        assert_eq!(RpcError::from(Error::from(timeout)).code, -32603);
    }
}
