//! The conformance fixture's tools: what `tools/list` shows, and what each one does.
//!
//! Every tool the suite calls is here, under the name and with the observable behaviour
//! its scenario checks. Tools that need the client's help (sampling, elicitation, roots)
//! are written once as askers (see `input`) and work in both eras: real requests to a
//! legacy client, `input_required` rounds for a modern one. The diagnostic tools the
//! stateless scenarios use exist only in the modern era.

use std::thread;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::content::{embedded, png, text, tool_result, wav};
use super::input::{self, Inputs, Step};
use super::logging::Level;
use super::subscriptions::Change;
use super::{Fixture, Reply};
use crate::era::{self, CLIENT_CAPABILITIES_KEY, Era};
use crate::wire::{INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, RpcError};

/// The pause between the progress or log notifications of one call.
const NOTIFICATION_GAP: Duration = Duration::from_millis(50);

/// Tools of both eras, in listing order: name and description. The input schema is
/// `{}`-shaped unless [`input_schema`] says otherwise.
const BOTH_ERAS: [(&str, &str); 15] = [
    ("test_simple_text", "Returns one fixed text block."),
    ("test_image_content", "Returns one PNG image block."),
    ("test_audio_content", "Returns one WAV audio block."),
    ("test_embedded_resource", "Returns one embedded text resource."),
    ("test_multiple_content_types", "Returns a text, an image and an embedded JSON resource."),
    ("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 to the request's progressToken, then answers."),
    ("test_error_handling", "Fails as a tool: an isError result."),
    ("test_tool_with_logging", "Logs three info messages while it runs (modern requests: only with a logLevel)."),
    ("test_logging_levels", "Logs one info message, then one error message (the era's logging rules apply)."),
    ("test_sampling", "Asks the client to sample a reply to prompt, and returns it."),
    ("test_elicitation", "Asks the user to respond to message, and returns the answer."),
    ("test_elicitation_sep1034_defaults", "Elicits a form whose fields all carry defaults."),
    ("test_elicitation_sep1330_enums", "Elicits a form with every kind of enum field."),
    ("json_schema_2020_12_tool", "Takes a contact described in JSON Schema 2020-12 and echoes it."),
    ("test_reconnection", "Answers after a short pause (over stdio there is no stream to drop)."),
];

/// Diagnostic tools for 2026-07-28 requests only.
const MODERN_ONLY: [(&str, &str); 14] = [
    ("test_missing_capability", "Needs the sampling client capability; without it, error -32021."),
    ("test_streaming_elicitation", "Answers with notifications and a result only, never a request."),
    ("test_logging_tool", "Logs one info message, but only to a request that set a logLevel."),
    ("test_trigger_tool_change", "Announces a tools list change to the subscriptions that asked for it."),
    ("test_trigger_prompt_change", "Announces a prompts list change to the subscriptions that asked for it."),
    ("test_input_required_result_elicitation", "Asks the user's name (key user_name), then greets them."),
    ("test_input_required_result_sampling", "Asks the client to sample an answer, then returns it."),
    ("test_input_required_result_list_roots", "Asks for the client's roots, then counts them."),
    (
        "test_input_required_result_request_state",
        "Asks for confirmation; completes only when its requestState comes back.",
    ),
    ("test_input_required_result_multiple_inputs", "Asks for a name, a sampled greeting and the roots at once."),
    ("test_input_required_result_multi_round", "Asks for a name, then a colour, in two rounds."),
    ("test_input_required_result_tampered_state", "Asks for confirmation; an altered requestState is refused."),
    ("test_input_required_result_capabilities", "Asks only through the capabilities the request declared."),
    ("test_header_param", "Echoes region, an argument mirrored into the Mcp-Param-Region header."),
];

/// The fixture's tools as listed in `era`.
pub fn catalogue(era: Era) -> Vec<Value> {
    let modern_only: &[(&str, &str)] = match era {
        Era::Legacy => &[],
        Era::Modern => &MODERN_ONLY,
    };
    BOTH_ERAS
        .iter()
        .chain(modern_only)
        .map(|(name, description)| json!({"name": name, "description": description, "inputSchema": input_schema(name)}))
        .collect()
}

/// Whether `name` is one of the fixture's tools in `era`.
pub fn is_ours(era: Era, name: &str) -> bool {
    BOTH_ERAS.iter().any(|(ours, _)| *ours == name)
        || (era == Era::Modern && MODERN_ONLY.iter().any(|(ours, _)| *ours == name))
}

fn input_schema(name: &str) -> Value {
    let one_string = |key: &str, description: &str| {
        json!({
            "type": "object",
            "properties": {key: {"type": "string", "description": description}},
            "required": [key],
        })
    };
    match name {
        "test_sampling" => one_string("prompt", "What to ask the model"),
        "test_elicitation" => one_string("message", "What to ask the user"),
        "test_header_param" => json!({
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region", "description": "Where"}},
            "required": ["region"],
        }),
        "json_schema_2020_12_tool" => json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                },
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"},
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {
                "properties": {"contactMethod": {"const": "phone"}},
                "required": ["contactMethod"],
            },
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false,
        }),
        _ => json!({"type": "object", "properties": {}}),
    }
}

/// One call of a fixture tool (`is_ours` said so), on its own thread: it may sleep
/// between notifications, or wait for a legacy client's answers.
pub fn call(fixture: &Fixture, era: Era, params: &Value) -> Result<Reply, RpcError> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let empty = Map::new();
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(arguments)) => arguments,
        Some(_) => return Err(bad_argument(name, "arguments must be an object")),
    };
    let string_argument = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| bad_argument(name, &format!("{key} (a string) is required")))
    };
    let call = Call { fixture, era, params, target: format!("tools/call {name}") };
    let done = |body: Value| Ok(Reply::Complete(body));
    match name {
        "test_simple_text" => done(tool_result(vec![text("This is a simple text response for testing.")])),
        "test_image_content" => done(tool_result(vec![png()])),
        "test_header_param" => done(tool_result(vec![text(&format!("Region: {}", string_argument("region")?))])),
        "test_audio_content" => done(tool_result(vec![wav()])),
        "test_embedded_resource" => done(tool_result(vec![embedded(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        )])),
        "test_multiple_content_types" => done(tool_result(vec![
            text("Multiple content types test:"),
            png(),
            embedded(
                "test://mixed-content-resource",
                "application/json",
                &json!({"test": "data", "value": 123}).to_string(),
            ),
        ])),
        "test_tool_with_progress" => {
            let reported = call.report_progress();
            done(tool_result(vec![text(&format!("Done; {reported} progress notification(s) sent"))]))
        }
        "test_error_handling" => done(json!({
            "content": [text("This tool intentionally returns an error for testing")],
            "isError": true,
        })),
        "test_tool_with_logging" => {
            let messages = ["Tool execution started", "Tool processing data", "Tool execution completed"];
            for (i, message) in messages.into_iter().enumerate() {
                if i > 0 {
                    thread::sleep(NOTIFICATION_GAP);
                }
                fixture.log(era, params, Level::INFO, message);
            }
            done(tool_result(vec![text("Tool with logging executed successfully")]))
        }
        // Not in the official suite: shows a gateway's level filtering (one message each
        // side of a threshold set at warning or error).
        "test_logging_levels" => {
            fixture.log(era, params, Level::INFO, "an info message");
            fixture.log(era, params, Level::ERROR, "an error message");
            done(tool_result(vec![text("Logged at info and error")]))
        }
        "test_sampling" => {
            let prompt = string_argument("prompt")?;
            call.ask(|inputs| {
                Ok(match inputs.sampled_text("llm")? {
                    Some(reply) => Step::Done(tool_result(vec![text(&format!("LLM response: {reply}"))])),
                    None => ask_one("llm", input::sampling(prompt, 100)),
                })
            })
        }
        "test_elicitation" => {
            let message = string_argument("message")?;
            let schema = json!({
                "type": "object",
                "properties": {"response": {"type": "string", "description": "Your answer"}},
                "required": ["response"],
            });
            call.ask(|inputs| {
                Ok(match inputs.elicited("response")? {
                    Some(answer) => Step::Done(tool_result(vec![text(&format!(
                        "User response: action={}, content={}",
                        answer.action,
                        answer.content_json()
                    ))])),
                    None => ask_one("response", input::elicitation(message, schema.clone())),
                })
            })
        }
        "test_elicitation_sep1034_defaults" => call.elicit_form(
            "Please review these fields; each has a default.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "Age", "default": 30},
                    "score": {"type": "number", "description": "Score", "default": 95.5},
                    "status": {
                        "type": "string",
                        "description": "Status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active",
                    },
                    "verified": {"type": "boolean", "description": "Verified", "default": true},
                },
                "required": [],
            }),
        ),
        "test_elicitation_sep1330_enums" => {
            let titled = |prefix: &str, titles: [&str; 3]| -> Vec<Value> {
                titles
                    .iter()
                    .enumerate()
                    .map(|(i, title)| json!({"const": format!("{prefix}{}", i + 1), "title": title}))
                    .collect()
            };
            call.elicit_form(
                "Please choose from these enum fields.",
                json!({
                    "type": "object",
                    "properties": {
                        "untitledSingle": {
                            "type": "string",
                            "description": "Pick one",
                            "enum": ["option1", "option2", "option3"],
                        },
                        "titledSingle": {
                            "type": "string",
                            "description": "Pick one (titled)",
                            "oneOf": titled("value", ["First", "Second", "Third"]),
                        },
                        "legacyEnum": {
                            "type": "string",
                            "description": "Pick one (legacy titles)",
                            "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option 1", "Option 2", "Option 3"],
                        },
                        "untitledMulti": {
                            "type": "array",
                            "description": "Pick one to three",
                            "minItems": 1,
                            "maxItems": 3,
                            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                        },
                        "titledMulti": {
                            "type": "array",
                            "description": "Pick one to three (titled)",
                            "minItems": 1,
                            "maxItems": 3,
                            "items": {"anyOf": titled("value", ["First", "Second", "Third"])},
                        },
                    },
                    "required": [],
                }),
            )
        }
        "json_schema_2020_12_tool" => done(tool_result(vec![text(&format!(
            "JSON Schema 2020-12 tool called with: {}",
            Value::Object(arguments.clone())
        ))])),
        "test_reconnection" => {
            thread::sleep(NOTIFICATION_GAP);
            done(tool_result(vec![text("Reconnection test completed; stdio has no stream to drop, so none was.")]))
        }
        _ => call.modern_only(name),
    }
}

/// What one tool call knows about its request.
struct Call<'a> {
    fixture: &'a Fixture,
    era: Era,
    params: &'a Value,
    /// `tools/call <name>`, which a modern `requestState` is bound to.
    target: String,
}

impl Call<'_> {
    fn modern_only(&self, name: &str) -> Result<Reply, RpcError> {
        let done = |line: &str| Ok(Reply::Complete(tool_result(vec![text(line)])));
        match name {
            "test_missing_capability" => {
                let capabilities = era::meta(self.params).and_then(|m| m.get(CLIENT_CAPABILITIES_KEY));
                if !declared(capabilities, "sampling") {
                    return Err(RpcError::new(
                        MISSING_CLIENT_CAPABILITY,
                        "test_missing_capability needs the sampling client capability",
                    )
                    .with_data(json!({"requiredCapabilities": {"sampling": {}}})));
                }
                done("Success: the request declared sampling")
            }
            "test_streaming_elicitation" => {
                self.report_progress();
                done("Streaming complete")
            }
            "test_logging_tool" => {
                self.fixture.log(self.era, self.params, Level::INFO, "test_logging_tool ran");
                done("Logging evaluated")
            }
            "test_trigger_tool_change" => {
                let told = self.fixture.listens.changed(Change::Tools);
                done(&format!("Tools list change sent to {told} subscription(s)"))
            }
            "test_trigger_prompt_change" => {
                let told = self.fixture.listens.changed(Change::Prompts);
                done(&format!("Prompts list change sent to {told} subscription(s)"))
            }
            "test_input_required_result_elicitation" => self.ask(|inputs| {
                Ok(match inputs.elicited("user_name")? {
                    Some(answer) if !answer.accepted() => Step::Done(tool_result(vec![text(&format!(
                        "No name given (the user chose {})",
                        answer.action
                    ))])),
                    Some(answer) if answer.text("name").is_some() => {
                        let name = answer.text("name").unwrap_or_default();
                        Step::Done(tool_result(vec![text(&format!("Hello, {name}!"))]))
                    }
                    _ => ask_one("user_name", name_question("What is your name?")),
                })
            }),
            "test_input_required_result_sampling" => self.ask(|inputs| {
                Ok(match inputs.sampled_text("capital_question")? {
                    Some(reply) => Step::Done(tool_result(vec![text(&format!("Sampling result: {reply}"))])),
                    None => ask_one("capital_question", input::sampling("What is the capital of France?", 100)),
                })
            }),
            "test_input_required_result_list_roots" => self.ask(|inputs| {
                Ok(match inputs.roots("client_roots")? {
                    Some(roots) => Step::Done(tool_result(vec![text(&format!("Found {} root(s)", roots.len()))])),
                    None => ask_one("client_roots", input::roots_list()),
                })
            }),
            "test_input_required_result_request_state" => self.ask(|inputs| {
                Ok(match inputs.elicited("confirm")? {
                    Some(answer) if inputs.state_verified => {
                        let ok = answer.field("ok").cloned().unwrap_or(Value::Null);
                        Step::Done(tool_result(vec![text(&format!(
                            "state-ok: requestState came back intact (ok={ok})"
                        ))]))
                    }
                    _ => ask_one("confirm", confirm_question()),
                })
            }),
            "test_input_required_result_tampered_state" => self.ask(|inputs| {
                Ok(match inputs.elicited("confirm")? {
                    Some(_) if inputs.state_verified => {
                        Step::Done(tool_result(vec![text("integrity-ok: requestState verified")]))
                    }
                    _ => ask_one("confirm", confirm_question()),
                })
            }),
            "test_input_required_result_multiple_inputs" => self.ask(|inputs| {
                let name = inputs.elicited("user_name")?;
                let greeting = inputs.sampled_text("greeting")?;
                let roots = inputs.roots("client_roots")?;
                if let (Some(name), Some(greeting), Some(roots)) = (&name, &greeting, roots) {
                    return Ok(Step::Done(tool_result(vec![text(&format!(
                        "Name: {}; greeting: {greeting}; roots: {}",
                        name.text("name").unwrap_or("(none given)"),
                        roots.len()
                    ))])));
                }
                let mut questions = Map::new();
                if name.is_none() {
                    questions.insert("user_name".into(), name_question("What is your name?"));
                }
                if greeting.is_none() {
                    questions.insert("greeting".into(), input::sampling("Generate a greeting", 50));
                }
                if roots.is_none() {
                    questions.insert("client_roots".into(), input::roots_list());
                }
                Ok(Step::Ask(questions))
            }),
            "test_input_required_result_multi_round" => self.ask(|inputs| {
                let Some(name) = inputs.elicited("step1")? else {
                    return Ok(ask_one("step1", name_question("Step 1: What is your name?")));
                };
                let Some(colour) = inputs.elicited("step2")? else {
                    let question = input::elicitation(
                        "Step 2: What is your favorite color?",
                        json!({
                            "type": "object",
                            "properties": {"color": {"type": "string"}},
                            "required": ["color"],
                        }),
                    );
                    return Ok(ask_one("step2", question));
                };
                Ok(Step::Done(tool_result(vec![text(&format!(
                    "Multi-round complete: {} likes {}",
                    name.text("name").unwrap_or("someone"),
                    colour.text("color").unwrap_or("no colour in particular")
                ))])))
            }),
            "test_input_required_result_capabilities" => self.ask(|inputs| {
                let capabilities = Some(inputs.client_capabilities);
                let mut questions = Map::new();
                if declared(capabilities, "elicitation") {
                    let question = input::elicitation(
                        "Please enter a value",
                        json!({
                            "type": "object",
                            "properties": {"value": {"type": "string"}},
                            "required": ["value"],
                        }),
                    );
                    questions.insert("elicit_input".into(), question);
                }
                if declared(capabilities, "sampling") {
                    questions.insert("sample_input".into(), input::sampling("Say hello", 50));
                }
                if declared(capabilities, "roots") {
                    questions.insert("client_roots".into(), input::roots_list());
                }
                if questions.is_empty() {
                    return Ok(Step::Done(tool_result(vec![text(
                        "The request declared no client capability to ask through",
                    )])));
                }
                inputs.elicited("elicit_input")?;
                inputs.sampled_text("sample_input")?;
                inputs.roots("client_roots")?;
                if questions.keys().all(|key| inputs.answered(key)) {
                    let keys: Vec<&str> = questions.keys().map(String::as_str).collect();
                    return Ok(Step::Done(tool_result(vec![text(&format!(
                        "capabilities-ok: received {}",
                        keys.join(",")
                    ))])));
                }
                questions.retain(|key, _| !inputs.answered(key));
                Ok(Step::Ask(questions))
            }),
            _ => unreachable!("is_ours vouched for {name}"),
        }
    }

    /// Runs an asker in this call's era.
    fn ask(&self, asker: impl Fn(&Inputs) -> Result<Step, RpcError>) -> Result<Reply, RpcError> {
        match self.era {
            Era::Legacy => {
                let capabilities = self.fixture.session_capabilities();
                let asker = |inputs: &Inputs| match asker(inputs) {
                    Ok(step) if self.fixture.echo_call_id => Ok(super::call_id::name_the_call(self.params, step)),
                    other => other,
                };
                input::legacy(&self.fixture.client, &capabilities, asker).map(Reply::Complete)
            }
            Era::Modern => input::modern(&self.fixture.seal, &self.target, self.params, asker),
        }
    }

    /// Elicits one form and reports what came back.
    fn elicit_form(&self, message: &str, schema: Value) -> Result<Reply, RpcError> {
        self.ask(|inputs| {
            Ok(match inputs.elicited("form")? {
                Some(answer) => Step::Done(tool_result(vec![text(&format!(
                    "Elicitation completed: action={}, content={}",
                    answer.action,
                    answer.content_json()
                ))])),
                None => ask_one("form", input::elicitation(message, schema.clone())),
            })
        })
    }

    /// Sends progress 0, 50 and 100 of 100, 50 ms apart, if the request asked for
    /// progress with `_meta.progressToken`. Returns how many were sent.
    fn report_progress(&self) -> usize {
        let token = era::meta(self.params)
            .and_then(|meta| meta.get("progressToken"))
            .filter(|token| token.is_string() || token.is_i64() || token.is_u64());
        let mut sent = 0;
        for (i, progress) in [0, 50, 100].into_iter().enumerate() {
            if i > 0 {
                thread::sleep(NOTIFICATION_GAP);
            }
            if let Some(token) = token {
                self.fixture.out.notify_with(
                    "notifications/progress",
                    json!({
                        "progressToken": token,
                        "progress": progress,
                        "total": 100,
                        "message": format!("{progress} of 100 done"),
                    }),
                );
                sent += 1;
            }
        }
        sent
    }
}

fn ask_one(key: &str, question: Value) -> Step {
    Step::Ask(Map::from_iter([(key.to_owned(), question)]))
}

fn name_question(message: &str) -> Value {
    input::elicitation(
        message,
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
    )
}

fn confirm_question() -> Value {
    input::elicitation(
        "Please confirm",
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}),
    )
}

/// Whether a `ClientCapabilities` object declares `capability`.
fn declared(capabilities: Option<&Value>, capability: &str) -> bool {
    capabilities.and_then(|capabilities| capabilities.get(capability)).is_some_and(|declared| !declared.is_null())
}

fn bad_argument(tool: &str, problem: &str) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("tools/call {tool}: {problem}"))
}
