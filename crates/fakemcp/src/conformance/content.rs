//! The fixed media and content blocks the conformance fixture hands out.
//!
//! The image and the sound are tiny but real files (a 1×1 PNG, a 4-sample 8 kHz WAV), so a
//! client that decodes them gets no error.

use serde_json::{Value, json};

/// A 1×1 RGB PNG, base64.
pub const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mPQ6w4HAAH7ARFK28dFAAAAAElFTkSuQmCC";

/// Four samples of 16-bit mono silence at 8 kHz, as a WAV file, base64.
pub const WAV_BASE64: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQgAAAAAAAAAAAAAAA==";

pub fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

pub fn png() -> Value {
    json!({"type": "image", "data": PNG_BASE64, "mimeType": "image/png"})
}

pub fn wav() -> Value {
    json!({"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"})
}

/// An embedded text resource block.
pub fn embedded(uri: &str, mime_type: &str, text: &str) -> Value {
    json!({"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": text}})
}

/// A tool result made of these content blocks.
pub fn tool_result(content: Vec<Value>) -> Value {
    json!({"content": content})
}
