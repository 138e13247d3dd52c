//! Tool arguments mirrored into HTTP headers (2026-07-28): a property of a tool's
//! `inputSchema` annotated `"x-mcp-header": "Name"` travels as `Mcp-Param-Name` on
//! `tools/call` over HTTP. An annotation that breaks the rules makes the whole tool
//! invalid, and a client must leave such a tool out of `tools/list`.

use serde_json::Value;

pub const ANNOTATION: &str = "x-mcp-header";

/// One mirrored argument: the header's name part, and the chain of `properties` keys that
/// leads to the argument.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamHeader {
    pub name: String,
    pub path: Vec<String>,
}

/// The mirrored arguments of a tool, or why its annotations make it invalid.
pub fn of_tool(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    // Most tools mirror nothing: looked for without building a path, at every call of an
    // exposed tool, before walking the schema with one.
    if !mentions_annotation(input_schema) {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut found)?;
    for (i, a) in found.iter().enumerate() {
        if found[..i].iter().any(|b| b.name.eq_ignore_ascii_case(&a.name)) {
            return Err(format!("{ANNOTATION} {:?} is used twice", a.name));
        }
    }
    Ok(found)
}

fn walk(schema: &Value, path: &mut Vec<String>, found: &mut Vec<ParamHeader>) -> Result<(), String> {
    let Value::Object(map) = schema else { return Ok(()) };
    for (key, child) in map {
        match key.as_str() {
            "properties" => {
                let Value::Object(props) = child else { continue };
                for (name, prop) in props {
                    path.push(name.clone());
                    if let Some(annotation) = prop.get(ANNOTATION) {
                        found.push(check(annotation, prop, path)?);
                    }
                    walk(prop, path, found)?;
                    path.pop();
                }
            }
            ANNOTATION => {} // checked by the `properties` step that reached this schema
            // Anything below another keyword is not statically reachable.
            _ if mentions_annotation(child) => {
                return Err(format!("{ANNOTATION} under {key:?} is not reachable through \"properties\" alone"));
            }
            _ => {}
        }
    }
    Ok(())
}

fn check(annotation: &Value, prop: &Value, path: &[String]) -> Result<ParamHeader, String> {
    let at = path.join(".");
    let name = annotation.as_str().ok_or_else(|| format!("{ANNOTATION} of {at:?} must be a string"))?;
    let token = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(format!("{ANNOTATION} {name:?} of {at:?} is not an HTTP field-name token"));
    }
    match prop.get("type").and_then(Value::as_str) {
        Some("string" | "integer" | "boolean") => Ok(ParamHeader { name: name.to_owned(), path: path.to_vec() }),
        other => Err(format!("{ANNOTATION} on {at:?} needs type string, integer or boolean, not {other:?}")),
    }
}

fn mentions_annotation(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key(ANNOTATION) || m.values().any(mentions_annotation),
        Value::Array(items) => items.iter().any(mentions_annotation),
        _ => false,
    }
}

/// The header value for an argument at `path`, or `None` when it is absent or null.
pub fn value(arguments: &Value, path: &[String]) -> Option<String> {
    text(arguments, path).map(|t| crate::header::encode(&t))
}

/// The argument at `path` as header text, before encoding; `None` when absent or null.
pub fn text(arguments: &Value, path: &[String]) -> Option<String> {
    let mut v = arguments;
    for key in path {
        v = v.get(key)?;
    }
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.as_i64().filter(|i| i.unsigned_abs() < (1 << 53))?.to_string()),
        _ => None,
    }
}

/// Checks the `Mcp-Param-*` headers a request came with (`received`: the name after the
/// prefix, lowercased, and the raw value) against the arguments they mirror: each
/// argument present must have its header, decoded equal to it (integers compared as
/// numbers). The error says which header and why.
pub fn verify(mirrored: &[ParamHeader], arguments: &Value, received: &[(String, String)]) -> Result<(), String> {
    for param in mirrored {
        let Some(body) = text(arguments, &param.path) else { continue };
        let at = param.path.join(".");
        let header = format!("Mcp-Param-{}", param.name);
        let Some((_, raw)) = received.iter().find(|(name, _)| name.eq_ignore_ascii_case(&param.name)) else {
            return Err(format!("the {header} header is required: arguments.{at} is present"));
        };
        let decoded =
            crate::header::decode(raw.trim()).ok_or_else(|| format!("{header} is not valid base64 of UTF-8"))?;
        let same = match (body.parse::<i64>(), decoded.parse::<i64>()) {
            (Ok(a), Ok(b)) if arguments_is_integer(arguments, &param.path) => a == b,
            _ => decoded == body,
        };
        if !same {
            return Err(format!("{header} {decoded:?} does not match arguments.{at} {body:?}"));
        }
    }
    Ok(())
}

fn arguments_is_integer(arguments: &Value, path: &[String]) -> bool {
    let mut v = arguments;
    for key in path {
        match v.get(key) {
            Some(next) => v = next,
            None => return false,
        }
    }
    v.is_i64() || v.is_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn received_headers_must_mirror_the_arguments() {
        let mirrored = of_tool(&json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
        }}))
        .unwrap();
        let arguments = json!({"region": "Hello", "count": 42});
        let headers =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();
        assert!(verify(&mirrored, &arguments, &headers(&[("region", "Hello"), ("count", "42")])).is_ok());
        assert!(
            verify(&mirrored, &arguments, &headers(&[("REGION", "=?base64?SGVsbG8=?="), ("count", "042")])).is_ok()
        );
        assert!(
            verify(&mirrored, &arguments, &headers(&[("count", "42")]))
                .unwrap_err()
                .contains("Mcp-Param-Region header is required")
        );
        assert!(
            verify(&mirrored, &arguments, &headers(&[("region", "=?base64?SGVsbG8?="), ("count", "42")]))
                .unwrap_err()
                .contains("not valid base64")
        );
        assert!(
            verify(&mirrored, &arguments, &headers(&[("region", "=?base64?SGVs!!!bG8=?="), ("count", "42")])).is_err()
        );
        assert!(
            verify(&mirrored, &arguments, &headers(&[("region", "SGVsbG8="), ("count", "42")]))
                .unwrap_err()
                .contains("does not match")
        );
        // An argument that is absent needs no header.
        assert!(verify(&mirrored, &json!({"region": "Hello"}), &headers(&[("region", "Hello")])).is_ok());
    }

    #[test]
    fn annotated_properties_reachable_by_properties_alone_are_mirrored() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "q": {"type": "string"}
        }});
        let found = of_tool(&schema).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[1], ParamHeader { name: "N".into(), path: vec!["opts".into(), "n".into()] });
        let args = json!({"region": "Hello, 世界", "opts": {"n": 42}});
        assert_eq!(value(&args, &found[0].path).as_deref(), Some("=?base64?SGVsbG8sIOS4lueVjA==?="));
        assert_eq!(value(&args, &found[1].path).as_deref(), Some("42"));
        assert_eq!(value(&json!({"region": null}), &found[0].path), None);
    }

    #[test]
    fn annotations_that_break_the_rules_make_the_tool_invalid() {
        for bad in [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
        ] {
            assert!(of_tool(&bad).is_err(), "{bad}");
        }
    }
}
