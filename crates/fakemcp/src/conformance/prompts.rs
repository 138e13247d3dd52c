//! The conformance fixture's prompts, and what `prompts/get` returns for each.
//!
//! `test_input_required_result_prompt` exists only in the modern era: it needs the client
//! to answer a question first, which a modern request does by multi round-trip.

use serde_json::{Map, Value, json};

use super::Reply;
use super::content::{self, png};
use super::input::{self, Step};
use super::sealed_state::Seal;
use crate::era::Era;
use crate::wire::{INVALID_PARAMS, RpcError};

pub const WITH_ARGUMENTS: &str = "test_prompt_with_arguments";
pub const WITH_EMBEDDED_RESOURCE: &str = "test_prompt_with_embedded_resource";
const INPUT_REQUIRED: &str = "test_input_required_result_prompt";

/// The `prompts` of `prompts/list`.
pub fn list(era: Era) -> Value {
    let argument = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    let mut prompts = vec![
        json!({
            "name": "test_simple_prompt",
            "title": "Simple prompt",
            "description": "A prompt without arguments.",
        }),
        json!({
            "name": WITH_ARGUMENTS,
            "title": "Prompt with arguments",
            "description": "A prompt that quotes its two arguments.",
            "arguments": [
                argument("arg1", "First argument"),
                argument("arg2", "Second argument"),
            ],
        }),
        json!({
            "name": WITH_EMBEDDED_RESOURCE,
            "title": "Prompt with an embedded resource",
            "description": "A prompt that embeds the resource it is given.",
            "arguments": [argument("resourceUri", "URI of the resource to embed")],
        }),
        json!({
            "name": "test_prompt_with_image",
            "title": "Prompt with an image",
            "description": "A prompt that carries an image.",
        }),
    ];
    if era == Era::Modern {
        prompts.push(json!({
            "name": INPUT_REQUIRED,
            "title": "Prompt that needs input",
            "description": "Asks the client for context (multi round-trip) before answering.",
        }));
    }
    Value::Array(prompts)
}

/// Whether `prompts/list` in `era` names this prompt.
pub fn exists(era: Era, name: &str) -> bool {
    list(era).as_array().is_some_and(|prompts| prompts.iter().any(|prompt| prompt["name"] == name))
}

/// The result body of `prompts/get`.
pub fn get(seal: &Seal, era: Era, params: &Value) -> Result<Reply, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, "prompts/get: name must be a string"))?;
    if !exists(era, name) {
        return Err(RpcError::new(INVALID_PARAMS, format!("unknown prompt: {name}")));
    }
    let empty = Map::new();
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(arguments)) => arguments,
        Some(_) => {
            return Err(RpcError::new(INVALID_PARAMS, format!("prompts/get {name}: arguments must be an object")));
        }
    };
    let argument = |key: &str| {
        arguments.get(key).and_then(Value::as_str).ok_or_else(|| {
            RpcError::new(INVALID_PARAMS, format!("prompts/get {name}: argument {key} (a string) is required"))
        })
    };
    let user = |content: Value| json!({"role": "user", "content": content});
    let messages = match name {
        "test_simple_prompt" => vec![user(content::text("This is a simple prompt for testing."))],
        WITH_ARGUMENTS => {
            let (arg1, arg2) = (argument("arg1")?, argument("arg2")?);
            vec![user(content::text(&format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")))]
        }
        WITH_EMBEDDED_RESOURCE => vec![
            user(content::embedded(argument("resourceUri")?, "text/plain", "Embedded resource content for testing.")),
            user(content::text("Please process the embedded resource above.")),
        ],
        "test_prompt_with_image" => vec![user(png()), user(content::text("Please analyze the image above."))],
        INPUT_REQUIRED => return needs_context(seal, params),
        _ => unreachable!("exists() vouched for {name}"),
    };
    Ok(Reply::Complete(json!({"messages": messages})))
}

fn needs_context(seal: &Seal, params: &Value) -> Result<Reply, RpcError> {
    input::modern(seal, &format!("prompts/get {INPUT_REQUIRED}"), params, |inputs| {
        let context = inputs.elicited("user_context")?;
        match context.as_ref().and_then(|c| c.text("context")) {
            Some(context) => Ok(Step::Done(json!({
                "description": "A prompt built from the context the client supplied",
                "messages": [{
                    "role": "user",
                    "content": content::text(&format!("Use this context: {context}")),
                }],
            }))),
            None => Ok(Step::Ask(Map::from_iter([(
                "user_context".to_owned(),
                input::elicitation(
                    "What context should the prompt use?",
                    json!({
                        "type": "object",
                        "properties": {"context": {"type": "string"}},
                        "required": ["context"],
                    }),
                ),
            )]))),
        }
    })
}
