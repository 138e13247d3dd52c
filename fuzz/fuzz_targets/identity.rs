//! `_meta` and identity resolution: whatever a caller puts in `_meta`, and whatever
//! `transport.sessionMetaKeys` says, the session is a non-empty string from a listed key
//! (or the transport's), a host context is kept only over a host's own stdio, and nothing
//! mcpx owns is ever forwarded upstream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_gateway::identity::{HOST_CONTEXT_KEYS, Identity, Source, Transport};
use mcpx_gateway::invocation;
use mcpx_protocol::meta;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    // Layout: <flags byte> <keys, one a line> NUL <params JSON>.
    let Some((&flags, rest)) = data.split_first() else { return };
    let (keys, params) = match rest.iter().position(|b| *b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (&[][..], rest),
    };
    let keys: Vec<String> = String::from_utf8_lossy(keys).lines().map(str::to_owned).collect();
    let Ok(params) = serde_json::from_slice::<Value>(params) else { return };
    let transport = Transport {
        session: (flags & 1 != 0).then(|| "mcp-transport".to_owned()),
        stdio: flags & 2 != 0,
        pid: (flags & 4 != 0).then_some(42),
        ..Transport::default()
    };
    let identity = Identity::resolve(meta::of(&params), &keys, &transport);
    match &identity.source {
        Source::MetaKey(key) => {
            assert!(keys.contains(key));
            assert!(identity.session.as_deref().is_some_and(|s| !s.is_empty()));
        }
        Source::Transport => assert_eq!(identity.session, transport.session),
        Source::Unnamed => {
            assert_eq!(identity.session, None);
            assert!(transport.session.is_none());
        }
    }
    if !transport.stdio {
        assert!(identity.host.is_none());
    }
    assert_eq!(identity.pid, transport.pid);
    if let Some(forwarded) = invocation::forwarded_meta(&params) {
        assert!(forwarded.keys().all(|k| !k.starts_with(meta::MCPX_PREFIX)));
        assert!(HOST_CONTEXT_KEYS.iter().all(|k| !forwarded.contains_key(*k)));
        assert!(!forwarded.contains_key(meta::PROTOCOL_VERSION));
    }
    // What mcpx attaches is its own, whatever the caller sent under the same key.
    let mut upstream = params.clone();
    invocation::attach(&mut upstream, serde_json::json!({"version": 1}));
    assert_eq!(upstream["_meta"][meta::MCPX_INVOCATION], serde_json::json!({"version": 1}));
});
