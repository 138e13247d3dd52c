//! What a message too long to read still tells by its edges.
//!
//! A line over the length limit is dropped as it arrives, never held whole, so it cannot
//! be parsed. Its first and last bytes usually still say what it was and whose it was:
//! serializers write the top-level fields around the one large value, either first
//! (`{"jsonrpc":"2.0","id":7,"result":{…`) or last (`{"result":{…},"jsonrpc":"2.0","id":7}`).
//! Knowing the id, a peer answers (or fails) that one request instead of every request
//! in flight, or of none.
//!
//! Only what the edges show beyond doubt counts: a key at the top level of the object,
//! never one inside a nested value. Anything else reads as nothing.

use crate::message::RequestId;

/// How many bytes at each end of a dropped line are kept to read it by.
pub const EDGE_BYTES: usize = 256;

/// What a dropped message was, as far as its edges show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// A request (it names a `method`) with this id.
    Request(RequestId),
    /// A response (it has a `result` or an `error`) to the request with this id.
    Response(RequestId),
    /// A message with a `method` and no id in sight: a notification, or a request whose
    /// id sits in the middle, where nobody can read it.
    Unidentified,
}

/// Reads the first and last bytes of a dropped message. `None` when they do not show
/// whether it was a request or a response.
pub fn read_edges(head: &[u8], tail: &[u8]) -> Option<Dropped> {
    let leading = leading_fields(head);
    let key_seen = |names: &[&str]| leading.keys.iter().any(|k| names.contains(&k.as_str()));
    let id = leading.id.or_else(|| trailing_id(tail));
    if key_seen(&["method"]) {
        return Some(id.map_or(Dropped::Unidentified, Dropped::Request));
    }
    if key_seen(&["result", "error"]) {
        return id.map(Dropped::Response);
    }
    None
}

/// The top-level keys at the start of an object, up to the first value that does not
/// end within `head`, and the id among them.
struct Leading {
    keys: Vec<String>,
    id: Option<RequestId>,
}

fn leading_fields(head: &[u8]) -> Leading {
    let mut leading = Leading { keys: Vec::new(), id: None };
    let mut at = Cursor { bytes: head, pos: 0 };
    if !at.eat(b'{') {
        return leading;
    }
    loop {
        let Some(key) = at.string() else { return leading };
        if !at.eat(b':') {
            return leading;
        }
        leading.keys.push(key.clone());
        // An object or an array may be the large value: its key counts, and reading stops.
        match at.peek() {
            Some(b'"') => match at.string() {
                Some(text) if key == "id" => leading.id = Some(RequestId::String(text)),
                Some(_) => {}
                None => return leading,
            },
            Some(b'-' | b'0'..=b'9') => {
                let number = at.take_while(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
                if key == "id" {
                    leading.id = number.parse().ok().map(RequestId::Number);
                }
            }
            Some(b't' | b'f' | b'n') => {
                at.take_while(|b| b.is_ascii_alphabetic());
            }
            _ => return leading,
        }
        // A value cut off by the end of `head` is not known to be whole.
        if at.peek().is_none() {
            leading.id = leading.id.filter(|_| key != "id");
            return leading;
        }
        if !at.eat(b',') {
            return leading;
        }
    }
}

/// The id when it is the last field of the object: `"id": 7}` or `"id": "a"}` at the very
/// end. The closing brace of the line is the top-level object's, so the field before it is
/// a top-level one.
fn trailing_id(tail: &[u8]) -> Option<RequestId> {
    let rest = tail.trim_ascii_end().strip_suffix(b"}")?.trim_ascii_end();
    let (value, before) = if let Some(open) = rest.strip_suffix(b"\"") {
        // A string id without escapes: anything fancier is not worth guessing at.
        let start = open.iter().rposition(|b| *b == b'"')?;
        let text = &open[start + 1..];
        if text.contains(&b'\\') {
            return None;
        }
        (RequestId::String(std::str::from_utf8(text).ok()?.to_owned()), &open[..start])
    } else {
        let start = rest.iter().rposition(|b| !(b.is_ascii_digit() || *b == b'-')).map_or(0, |i| i + 1);
        let number = std::str::from_utf8(&rest[start..]).ok()?.parse().ok()?;
        (RequestId::Number(number), &rest[..start])
    };
    let before = before.trim_ascii_end().strip_suffix(b":")?.trim_ascii_end().strip_suffix(b"\"id\"")?;
    matches!(before.trim_ascii_end().last(), Some(b',' | b'{')).then_some(value)
}

/// Reads JSON tokens from the start of a byte string that may end anywhere.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn skip_space(&mut self) {
        while self.bytes.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.pos += usize::from(found);
        found
    }

    fn take_while(&mut self, keep: impl Fn(u8) -> bool) -> String {
        let start = self.pos;
        while self.bytes.get(self.pos).is_some_and(|b| keep(*b)) {
            self.pos += 1;
        }
        String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned()
    }

    /// A whole string token, unescaped; `None` when there is none here or it does not end.
    fn string(&mut self) -> Option<String> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.pos;
        let mut escaped = false;
        for (offset, byte) in self.bytes[start..].iter().enumerate() {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    let token = &self.bytes[start - 1..start + offset + 1];
                    self.pos = start + offset + 1;
                    return serde_json::from_slice(token).ok();
                }
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The edges of `message` as a reader that kept `EDGE_BYTES` at each end sees them.
    fn edges_of(message: &str) -> Option<Dropped> {
        let bytes = message.as_bytes();
        read_edges(&bytes[..EDGE_BYTES.min(bytes.len())], &bytes[bytes.len().saturating_sub(EDGE_BYTES)..])
    }

    fn big() -> String {
        format!(r#"{{"content":[{{"type":"text","text":"{}"}}],"nested":{{"id":99}}}}"#, "x".repeat(10_000))
    }

    #[test]
    fn an_id_written_before_the_large_value_is_read() {
        let response = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{}}}"#, big());
        assert_eq!(edges_of(&response), Some(Dropped::Response(RequestId::Number(7))));
        let request = format!(
            r#"{{ "jsonrpc": "2.0", "id": "call-1", "method": "sampling/createMessage", "params": {} }}"#,
            big()
        );
        assert_eq!(edges_of(&request), Some(Dropped::Request(RequestId::String("call-1".into()))));
    }

    #[test]
    fn an_id_written_last_is_read() {
        let response = format!(r#"{{"result":{},"jsonrpc":"2.0","id":12}}"#, big());
        assert_eq!(edges_of(&response), Some(Dropped::Response(RequestId::Number(12))));
        let request =
            format!("{{\"method\":\"tools/call\",\"params\":{},\"jsonrpc\":\"2.0\",\"id\":\"r-2\"}}\r", big());
        assert_eq!(edges_of(&request), Some(Dropped::Request(RequestId::String("r-2".into()))));
    }

    #[test]
    fn an_id_inside_a_nested_value_is_not_the_messages() {
        // The large value ends in a nested "id": it is not followed by the top-level brace.
        let response =
            format!(r#"{{"jsonrpc":"2.0","result":{{"text":"{}","inner":{{"id":5}}}}}}"#, "x".repeat(10_000));
        assert_eq!(edges_of(&response), None);
        let cut = r#"{"jsonrpc":"2.0","result":{"id":5,"#;
        assert_eq!(read_edges(cut.as_bytes(), b""), None);
    }

    #[test]
    fn a_message_that_shows_no_id_or_no_kind_reads_as_such() {
        let notification = format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{}}}"#, big());
        assert_eq!(edges_of(&notification), Some(Dropped::Unidentified));
        // An id cut off by the end of the head may be longer than what was kept.
        let cut = r#"{"jsonrpc":"2.0","method":"x","id":12"#;
        assert_eq!(read_edges(cut.as_bytes(), b"...\"x\"}"), Some(Dropped::Unidentified));
        let escaped = format!(r#"{{"result":{},"id":"a\"b"}}"#, big());
        assert_eq!(edges_of(&escaped), None);
        assert_eq!(edges_of(&"y".repeat(20_000)), None);
        assert_eq!(edges_of(&format!(r#"[{}]"#, big())), None);
    }
}
