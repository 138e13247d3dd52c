//! JSON-RPC 2.0 frames: telling a request from a notification from a response, without
//! taking the frame apart. Unknown fields stay where they are.

use serde_json::{Map, Value};

use crate::error::RpcError;

/// A request id: a string or an integer. `null` and other types are not ids.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RequestId {
    Number(i64),
    String(String),
}

impl RequestId {
    pub fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Some(RequestId::String(s.clone())),
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Number(n) => Value::from(*n),
            RequestId::String(s) => Value::from(s.clone()),
        }
    }
}

/// One classified frame. `params` is `Value::Null` when the frame had none.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request { id: RequestId, method: String, params: Value },
    Notification { method: String, params: Value },
    Response { id: RequestId, outcome: Result<Value, RpcError> },
}

/// Why a frame is not a JSON-RPC message. Carries the id when one could be read, so the
/// error response can echo it.
#[derive(Clone, Debug, PartialEq)]
pub struct Invalid {
    pub id: Option<Value>,
    pub error: RpcError,
}

impl Message {
    /// Classifies a parsed JSON value as a JSON-RPC 2.0 message.
    pub fn classify(frame: Value) -> Result<Message, Box<Invalid>> {
        let Value::Object(mut obj) = frame else {
            return Err(Box::new(Invalid {
                id: None,
                error: RpcError::invalid_request("a message must be a JSON object"),
            }));
        };
        let raw_id = obj.remove("id");
        let readable_id = raw_id.clone().filter(|v| RequestId::from_value(v).is_some());
        let invalid =
            |message: &str| Box::new(Invalid { id: readable_id.clone(), error: RpcError::invalid_request(message) });
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid("\"jsonrpc\" must be \"2.0\""));
        }
        let params = obj.remove("params").unwrap_or(Value::Null);
        if !(params.is_null() || params.is_object()) {
            return Err(invalid("\"params\" must be an object"));
        }
        match obj.remove("method") {
            Some(Value::String(method)) => match raw_id {
                None => Ok(Message::Notification { method, params }),
                Some(id) => match RequestId::from_value(&id) {
                    Some(id) => Ok(Message::Request { id, method, params }),
                    None => Err(invalid("\"id\" must be a string or an integer")),
                },
            },
            Some(_) => Err(invalid("\"method\" must be a string")),
            None => {
                let Some(id) = raw_id.as_ref().and_then(RequestId::from_value) else {
                    return Err(invalid("a response needs a string or integer \"id\""));
                };
                if let Some(result) = obj.remove("result") {
                    Ok(Message::Response { id, outcome: Ok(result) })
                } else if let Some(error) = obj.get("error").and_then(RpcError::from_value) {
                    Ok(Message::Response { id, outcome: Err(error) })
                } else {
                    Err(invalid("a message needs \"method\", \"result\" or \"error\""))
                }
            }
        }
    }

    /// Parses one frame from bytes. A parse failure is a -32700 with no id.
    pub fn parse(bytes: &[u8]) -> Result<Value, Box<Invalid>> {
        serde_json::from_slice(bytes).map_err(|e| Box::new(Invalid { id: None, error: RpcError::parse_error(e) }))
    }

    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Message::Request { id, method, params } => request(id, method, params.clone()),
            Message::Notification { method, params } => notification(method, params.clone()),
            Message::Response { id, outcome: Ok(result) } => result_response(&id.to_value(), result.clone()),
            Message::Response { id, outcome: Err(e) } => error_response(Some(&id.to_value()), e),
        }
    }
}

pub fn request(id: &RequestId, method: &str, params: Value) -> Value {
    let mut obj = Map::new();
    obj.insert("jsonrpc".into(), "2.0".into());
    obj.insert("id".into(), id.to_value());
    obj.insert("method".into(), method.into());
    if !params.is_null() {
        obj.insert("params".into(), params);
    }
    Value::Object(obj)
}

/// What a relay needs of a message to keep its books: the id, and whether it is a
/// request (it names a method) or a response. Read without building the message: the rest
/// of the line is checked as JSON and skipped. `None` for anything that is not a single
/// JSON object, or whose id is neither a string nor an integer.
pub fn peek(line: &[u8]) -> Option<(RequestId, Option<String>)> {
    #[derive(serde::Deserialize)]
    struct Routing {
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        method: Option<String>,
    }
    let routing: Routing = serde_json::from_slice(line).ok()?;
    Some((RequestId::from_value(routing.id.as_ref()?)?, routing.method))
}

/// The same request as [`request`], serialized from borrowed parts: for a frame that is
/// only written (and may be written again), without building a `Value` for it first.
/// One message read from its bytes without building its envelope (`jsonrpc`, `id`,
/// `method`, the top-level map) as a tree: `params`, `result` or `error` are the only trees
/// built. `None` when the bytes are anything else (not JSON, not one object, an invalid
/// message, a key twice): then `Message::parse` and `Message::classify` say what they are.
/// Where it answers, it answers what they would.
pub fn read(bytes: &[u8]) -> Option<Message> {
    use serde::Deserialize;
    use std::borrow::Cow;

    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        jsonrpc: Option<Cow<'a, str>>,
        // Present as `null` is not absent (an id or result of `null`, a method that is not
        // a string), as with `classify`.
        #[serde(default, deserialize_with = "present")]
        id: Option<Value>,
        #[serde(default, deserialize_with = "present")]
        method: Option<String>,
        params: Option<Value>,
        #[serde(default, deserialize_with = "present")]
        result: Option<Value>,
        error: Option<Value>,
    }
    fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
        T::deserialize(d).map(Some)
    }

    // A derived struct also reads a JSON array, by position: only an object is a message.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    let frame: Envelope = serde_json::from_slice(bytes).ok()?;
    if frame.jsonrpc.as_deref() != Some("2.0") {
        return None;
    }
    let params = frame.params.unwrap_or(Value::Null);
    if !(params.is_null() || params.is_object()) {
        return None;
    }
    let id = match frame.id {
        Some(id) => Some(RequestId::from_value(&id)?),
        None => None,
    };
    match (frame.method, id) {
        (Some(method), None) => Some(Message::Notification { method, params }),
        (Some(method), Some(id)) => Some(Message::Request { id, method, params }),
        (None, Some(id)) => match (frame.result, frame.error) {
            (Some(result), _) => Some(Message::Response { id, outcome: Ok(result) }),
            (None, Some(error)) => Some(Message::Response { id, outcome: Err(RpcError::from_value(&error)?) }),
            (None, None) => None,
        },
        (None, None) => None,
    }
}

/// The id and outcome of a response frame, read as [`read`] reads it; `None` for anything
/// else.
pub fn response_of(bytes: &[u8]) -> Option<(RequestId, Result<Value, RpcError>)> {
    match read(bytes)? {
        Message::Response { id, outcome } => Some((id, outcome)),
        _ => None,
    }
}

/// The bytes of the response to `id` with `result`: what serializing
/// `result_response(id, result)` gives, without building that frame first.
pub fn result_bytes(id: &Value, result: &Value) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Frame<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: &'a Value,
    }
    let mut bytes = Vec::with_capacity(512);
    serde_json::to_writer(&mut bytes, &Frame { jsonrpc: "2.0", id, result }).expect("a JSON value always serializes");
    bytes
}

pub fn request_bytes(id: &RequestId, method: &str, params: &Value) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Frame<'a> {
        jsonrpc: &'static str,
        id: Value,
        method: &'a str,
        #[serde(skip_serializing_if = "Value::is_null")]
        params: &'a Value,
    }
    let frame = Frame { jsonrpc: "2.0", id: id.to_value(), method, params };
    // Room for a typical request up front: growing from serde_json's 128 bytes reallocates.
    let mut bytes = Vec::with_capacity(512);
    serde_json::to_writer(&mut bytes, &frame).expect("a JSON value always serializes");
    bytes
}

pub fn notification(method: &str, params: Value) -> Value {
    let mut obj = Map::new();
    obj.insert("jsonrpc".into(), "2.0".into());
    obj.insert("method".into(), method.into());
    if !params.is_null() {
        obj.insert("params".into(), params);
    }
    Value::Object(obj)
}

pub fn result_response(id: &Value, result: Value) -> Value {
    object([("jsonrpc", "2.0".into()), ("id", id.clone()), ("result", result)])
}

/// A JSON object of these fields, the values moved in. (`json!` with a `Value` in it
/// serializes that value into a copy of itself, which for a result or a tool list is the
/// most expensive way to build the object.)
pub fn object<K: Into<String>>(fields: impl IntoIterator<Item = (K, Value)>) -> Value {
    Value::Object(fields.into_iter().map(|(key, value)| (key.into(), value)).collect())
}

/// An error response. The spec wants the request's id echoed; when it could not be read,
/// the id is omitted (the 2025-11-25 and 2026-07-28 schemas make it optional for errors).
pub fn error_response(id: Option<&Value>, error: &RpcError) -> Value {
    let mut obj = Map::new();
    obj.insert("jsonrpc".into(), "2.0".into());
    if let Some(id) = id {
        obj.insert("id".into(), id.clone());
    }
    obj.insert("error".into(), error.to_value());
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn peeking_reads_the_id_and_method_and_nothing_else() {
        let request = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"x":[1,{"y":null}]}}"#;
        assert_eq!(peek(request), Some((RequestId::String("a".into()), Some("tools/call".into()))));
        assert_eq!(peek(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#), Some((RequestId::Number(7), None)));
        assert_eq!(peek(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        assert_eq!(peek(br#"{"jsonrpc":"2.0","id":null,"error":{}}"#), None);
        assert_eq!(peek(br#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#), None);
        assert_eq!(peek(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#), None);
        assert_eq!(peek(br#"{"jsonrpc":"2.0","id":1,"method":"ping""#), None, "not JSON");
    }

    #[test]
    fn a_request_written_from_borrowed_parts_is_the_request_frame() {
        let params = json!({"name": "echo", "arguments": {"b": 1, "a": [true]}});
        for (id, params) in [(RequestId::Number(7), params), (RequestId::String("x".into()), Value::Null)] {
            let bytes = request_bytes(&id, "tools/call", &params);
            let parsed: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(parsed, request(&id, "tools/call", params));
        }
    }

    #[test]
    fn frames_are_classified_by_their_fields() {
        let req = Message::classify(json!({"jsonrpc":"2.0","id":1,"method":"ping"})).unwrap();
        assert_eq!(req, Message::Request { id: RequestId::Number(1), method: "ping".into(), params: Value::Null });
        let note = Message::classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).unwrap();
        assert!(matches!(note, Message::Notification { .. }));
        let resp = Message::classify(json!({"jsonrpc":"2.0","id":"a","result":{}})).unwrap();
        assert_eq!(resp, Message::Response { id: RequestId::String("a".into()), outcome: Ok(json!({})) });
    }

    #[test]
    fn bad_frames_are_invalid_requests_that_keep_a_readable_id() {
        let e = Message::classify(json!({"jsonrpc":"1.0","id":7,"method":"ping"})).unwrap_err();
        assert_eq!(e.error.code, -32600);
        assert_eq!(e.id, Some(json!(7)));
        let e = Message::classify(json!({"jsonrpc":"2.0","id":null,"method":"ping"})).unwrap_err();
        assert_eq!(e.id, None);
        let e = Message::classify(json!({"jsonrpc":"2.0","id":1,"method":"x","params":[1]})).unwrap_err();
        assert_eq!(e.error.code, -32600);
        assert!(Message::classify(json!([1])).is_err());
        assert_eq!(Message::parse(b"{nope").unwrap_err().error.code, -32700);
    }

    #[test]
    fn unknown_fields_survive() {
        let frame = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","x-extra":{"k":1}}});
        let msg = Message::classify(frame.clone()).unwrap();
        assert_eq!(msg.to_value(), frame);
    }
}

#[cfg(test)]
mod read_tests {
    use super::*;
    use serde_json::json;

    /// What `parse` then `classify` make of `bytes`, where it is a response.
    fn classified(bytes: &[u8]) -> Option<(RequestId, Result<Value, RpcError>)> {
        match Message::parse(bytes).ok().map(Message::classify)? {
            Ok(Message::Response { id, outcome }) => Some((id, outcome)),
            _ => None,
        }
    }

    #[test]
    fn a_message_read_from_bytes_is_what_classify_makes_of_it() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"b":1,"a":[2]}}}"#,
            r#"{"jsonrpc":"2.0","id":"r","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"r","method":"ping","params":null}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":"text"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","result":{}}"#,
            r#"["2.0",1,"m",null,null,null]"#,
            r#"  {"jsonrpc":"2.0","id":1,"method":"m"}  "#,
            r#"{"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":null}"#,
            r#"{"jsonrpc":null,"id":1,"result":{}}"#,
        ];
        for frame in frames {
            let classified = Message::parse(frame.as_bytes()).ok().and_then(|v| Message::classify(v).ok());
            match read(frame.as_bytes()) {
                // A key twice is left to the whole parse (where the last one wins).
                None if frame.contains(r#""method":"m","method""#) => assert!(classified.is_some()),
                fast => assert_eq!(fast, classified, "{frame}"),
            }
        }
    }

    #[test]
    fn a_result_written_from_borrowed_parts_is_the_result_response() {
        let (id, result) = (json!("a-1"), json!({"content": [{"type": "text", "text": "é\n"}], "z": 1, "a": null}));
        let written = result_bytes(&id, &result);
        assert_eq!(written, serde_json::to_vec(&result_response(&id, result)).unwrap());
    }

    #[test]
    fn a_response_read_from_bytes_is_what_classify_makes_of_it_and_nothing_else_is_one() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}],"x":{"b":1,"a":2}}}"#,
            r#"{"result":{"k":"v"},"id":"s-1","jsonrpc":"2.0","extra":true}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no","data":{"d":[1]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"params":[1],"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"params":null,"result":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2\u002e0","id":1,"result":{"escaped":"\u00e9"}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            r#"["2.0",7,null,null,{"a":1},null]"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}} trailing"#,
            r#"not json"#,
            "",
        ];
        for frame in frames {
            let fast = response_of(frame.as_bytes());
            assert_eq!(fast, classified(frame.as_bytes()), "{frame}");
        }
        let fast = response_of(frames[0].as_bytes()).unwrap().1.unwrap();
        let keys: Vec<&String> = fast["x"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "a"], "the result keeps its order");
    }
}
