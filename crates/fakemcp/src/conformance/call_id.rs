//! `--echo-call-id`: a question names the call it is for, as mcpx asks of the servers it
//! launches (docs/invocation-context.md): the `callId` of the tool call's
//! `_meta["dev.mcpx/invocation"]`, echoed in the question's own
//! `params._meta["dev.mcpx/invocation"].callId`. Without the flag a question names no call,
//! as most handshake-era servers send it.

use serde_json::{Value, json};

use super::input::Step;

const INVOCATION: &str = "dev.mcpx/invocation";

/// `step`, its questions naming the call whose params are `call_params` (when mcpx told
/// the call's id).
pub fn name_the_call(call_params: &Value, step: Step) -> Step {
    let call_id = call_params.get("_meta").and_then(|m| m.get(INVOCATION)).and_then(|i| i.get("callId")).cloned();
    match (step, call_id) {
        (Step::Ask(mut questions), Some(call_id)) => {
            for question in questions.values_mut() {
                let params = &mut question["params"];
                if !params.is_object() {
                    *params = json!({});
                }
                params["_meta"][INVOCATION] = json!({"callId": call_id});
            }
            Step::Ask(questions)
        }
        (step, _) => step,
    }
}
