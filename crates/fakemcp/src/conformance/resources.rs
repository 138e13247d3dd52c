//! The conformance fixture's resources: three fixed ones, one that is "watched", and one
//! template. Nothing here ever changes, so subscriptions to them are trivially honoured.

use serde_json::{Value, json};

use super::content::PNG_BASE64;

const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";
const WATCHED: &str = "test://watched-resource";
pub const TEMPLATE: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

/// The `resources` of `resources/list`.
pub fn list() -> Value {
    json!([
        {
            "uri": STATIC_TEXT,
            "name": "static-text",
            "title": "Static text",
            "description": "A fixed plain-text resource.",
            "mimeType": "text/plain",
        },
        {
            "uri": STATIC_BINARY,
            "name": "static-binary",
            "title": "Static binary",
            "description": "A fixed PNG image, served as a blob.",
            "mimeType": "image/png",
        },
        {
            "uri": WATCHED,
            "name": "watched-resource",
            "title": "Watched resource",
            "description": "A resource clients may subscribe to.",
            "mimeType": "text/plain",
        },
    ])
}

/// The `resourceTemplates` of `resources/templates/list`.
pub fn templates() -> Value {
    json!([{
        "uriTemplate": TEMPLATE,
        "name": "template",
        "title": "Templated data",
        "description": "JSON data for any id.",
        "mimeType": "application/json",
    }])
}

/// The `contents` of `resources/read` for `uri`, or `None` if there is no such resource.
pub fn read(uri: &str) -> Option<Value> {
    let (mime_type, body) = match uri {
        STATIC_TEXT => ("text/plain", json!({"text": "This is the content of the static text resource."})),
        STATIC_BINARY => ("image/png", json!({"blob": PNG_BASE64})),
        WATCHED => ("text/plain", json!({"text": "Watched resource content"})),
        _ => {
            let id = template_id(uri)?;
            let data = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            ("application/json", json!({"text": data.to_string()}))
        }
    };
    let mut contents = json!({"uri": uri, "mimeType": mime_type});
    contents.as_object_mut().expect("an object literal").extend(body.as_object().expect("an object literal").clone());
    Some(json!([contents]))
}

pub fn exists(uri: &str) -> bool {
    matches!(uri, STATIC_TEXT | STATIC_BINARY | WATCHED) || template_id(uri).is_some()
}

/// The `{id}` of a URI matching the template: one non-empty path segment.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(TEMPLATE_PREFIX)?.strip_suffix(TEMPLATE_SUFFIX)?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}
