//! HTTP header values that mirror body fields in 2026-07-28 (`Mcp-Name`, `Mcp-Param-*`):
//! values that cannot travel as plain header text are sent as `=?base64?<b64>?=`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// Decodes a mirrored header value: the base64 form when it is one, the text otherwise.
/// `None` when the value claims to be base64 but is not valid base64 of UTF-8.
pub fn decode(value: &str) -> Option<String> {
    match value.strip_prefix(PREFIX).and_then(|v| v.strip_suffix(SUFFIX)) {
        Some(b64) => String::from_utf8(STANDARD.decode(b64).ok()?).ok(),
        None => Some(value.to_owned()),
    }
}

/// Encodes a value for a mirrored header, using the base64 form only when plain text
/// would not survive: non-ASCII or control characters, surrounding whitespace, or text
/// that would itself read as the base64 form.
pub fn encode(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with(PREFIX) && value.ends_with(SUFFIX));
    if plain { value.to_owned() } else { format!("{PREFIX}{}{SUFFIX}", STANDARD.encode(value)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_stay_plain_and_others_round_trip() {
        assert_eq!(encode("get_weather"), "get_weather");
        for v in ["héllo", " padded ", "line\nbreak", "=?base64?abc?="] {
            let e = encode(v);
            assert!(e.starts_with(PREFIX), "{v:?} → {e}");
            assert_eq!(decode(&e).as_deref(), Some(v));
        }
        assert_eq!(decode("=?base64?!!!?="), None);
    }
}
