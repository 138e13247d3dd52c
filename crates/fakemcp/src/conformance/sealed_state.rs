//! How a `requestState` survives its trip through the client unaltered.
//!
//! A modern multi round-trip request hands the client an opaque `requestState` to echo on
//! the retry. The client is untrusted, so the state is sealed: `<hex HMAC-SHA256>.<JSON>`,
//! keyed with 32 random bytes drawn when the process starts. Anything that does not open
//! with this process's key (edited, truncated, or minted by another process) is refused;
//! this module never says why, so the tag cannot be probed byte by byte.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

pub struct Seal {
    key: [u8; 32],
}

impl Seal {
    pub fn new() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Seal { key })
    }

    /// The sealed form of `payload`: its tag in hex, a dot, then its compact JSON.
    pub fn seal(&self, payload: &Value) -> String {
        let json = payload.to_string();
        let tag = self.mac(json.as_bytes()).finalize().into_bytes();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}.{json}")
    }

    /// The payload of a state this process sealed, or `None` if it was not, or was altered.
    pub fn open(&self, sealed: &str) -> Option<Value> {
        let (hex, json) = sealed.split_once('.')?;
        let tag = decode_hex(hex)?;
        self.mac(json.as_bytes()).verify_slice(&tag).ok()?;
        serde_json::from_str(json).ok()
    }

    fn mac(&self, message: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(message);
        mac
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 || !hex.is_ascii() {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_sealed_state_opens_only_unaltered_and_only_here() {
        let seal = Seal::new().unwrap();
        let payload = json!({"for": "tools/call x", "answers": {"a": 1}});
        let sealed = seal.seal(&payload);
        assert_eq!(seal.open(&sealed), Some(payload));
        assert_eq!(seal.open(&format!("{sealed}-TAMPERED")), None);
        assert_eq!(seal.open(&sealed.replacen("\"a\":1", "\"a\":2", 1)), None);
        assert_eq!(seal.open("not a state"), None);
        assert_eq!(Seal::new().unwrap().open(&sealed), None, "another process's key");
    }
}
