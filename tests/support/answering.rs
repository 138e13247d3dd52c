//! `tests/python/answering_client.py`: the real Python SDK client answering the questions a
//! server asks (elicitation, sampling, roots), for the issue-10 tests with real peers.

use std::process::Command;

use serde_json::Value;

use crate::paths;
use crate::python::venv_bin;

/// What the client answers: the elicitation's action and content, the sampled text and
/// (optionally) its one root; and the bearer token it sends, if any.
#[derive(Clone, Debug)]
pub struct Answers {
    pub elicit_action: &'static str,
    pub elicit_content: Value,
    pub sample_text: String,
    pub root: Option<String>,
    pub bearer: Option<String>,
}

impl Answers {
    /// Accepts an elicitation with `content`; samples `sample_text`.
    pub fn accept(content: Value, sample_text: &str) -> Answers {
        Answers {
            elicit_action: "accept",
            elicit_content: content,
            sample_text: sample_text.to_owned(),
            root: None,
            bearer: None,
        }
    }

    /// Declines every elicitation.
    pub fn decline() -> Answers {
        Answers {
            elicit_action: "decline",
            elicit_content: Value::Object(Default::default()),
            sample_text: "unused".to_owned(),
            root: None,
            bearer: None,
        }
    }
}

/// Runs `answering_client.py --url <url> --mode <mode> --tool <tool> --args <arguments>`
/// with `answers`, and returns its JSON line (`protocolVersion`, `era`, `asked`, `result`);
/// panics with its stderr when it fails.
#[track_caller]
pub fn answering_client(url: &str, mode: &str, tool: &str, arguments: &Value, answers: &Answers) -> Value {
    let script = paths::repo_root().join("tests/python/answering_client.py");
    let mut command = Command::new(venv_bin("python"));
    command
        .arg(&script)
        .args(["--url", url, "--mode", mode, "--tool", tool, "--timeout", "40"])
        .arg("--args")
        .arg(arguments.to_string())
        .args(["--elicit-action", answers.elicit_action])
        .arg("--elicit-content")
        .arg(answers.elicit_content.to_string())
        .arg("--sample-text")
        .arg(&answers.sample_text)
        .env("MCP_CLIENT_DEBUG", "1");
    if let Some(root) = &answers.root {
        command.arg("--root").arg(root);
    }
    if let Some(bearer) = &answers.bearer {
        command.arg("--bearer").arg(bearer);
    }
    let output = command.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    crate::process::json_line(&output, &format!("the answering Python SDK client ({mode}, {tool})"))
}

/// The methods of the questions the client was asked, in order.
pub fn asked_methods(out: &Value) -> Vec<&str> {
    out["asked"].as_array().map(|a| a.iter().filter_map(|q| q["method"].as_str()).collect()).unwrap_or_default()
}

/// All the text blocks of the client's tool result, joined with newlines.
pub fn result_text(out: &Value) -> String {
    out["result"]["content"]
        .as_array()
        .map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}
