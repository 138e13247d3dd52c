//! Frame parsing and classification: any bytes a caller or an upstream sends either fail
//! as a precise JSON-RPC error or classify into a message that survives its own round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_protocol::message::Message;
use mcpx_protocol::{code, header, meta};

fuzz_target!(|data: &[u8]| {
    // Mirrored header values (`Mcp-Name`, `Mcp-Param-*`) are read from the same bytes.
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some(decoded) = header::decode(text) {
            assert_eq!(header::decode(&header::encode(&decoded)).as_deref(), Some(decoded.as_str()));
        }
    }
    let value = match Message::parse(data) {
        Ok(value) => value,
        Err(invalid) => {
            assert_eq!(invalid.error.code, code::PARSE_ERROR);
            assert!(invalid.id.is_none());
            return;
        }
    };
    match Message::classify(value.clone()) {
        Ok(message) => {
            // What mcpx writes back out classifies as the same message.
            let again = Message::classify(message.to_value()).expect("a classified message re-classifies");
            assert_eq!(again, message);
            if let Message::Request { params, .. } | Message::Notification { params, .. } = &message {
                let _ = meta::ModernEnvelope::read(params).map(|e| e.revision());
                let mut forwarded = params.clone();
                if let Some(m) = forwarded.get_mut("_meta").and_then(|m| m.as_object_mut()) {
                    meta::strip_mcpx_keys(m);
                    assert!(m.keys().all(|k| !k.starts_with(meta::MCPX_PREFIX)));
                }
            }
        }
        Err(invalid) => {
            assert_eq!(invalid.error.code, code::INVALID_REQUEST);
            // An id is echoed only when it is one: a string or an integer.
            if let Some(id) = &invalid.id {
                assert!(id.is_string() || id.as_i64().is_some(), "echoed id {id}");
            }
            let response = mcpx_protocol::message::error_response(invalid.id.as_ref(), &invalid.error);
            assert!(serde_json::to_vec(&response).is_ok());
        }
    }
});
