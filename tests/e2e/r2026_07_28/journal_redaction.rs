//! `journal.arguments: redacted` keeps no secret: a corpus of secret shapes (values under
//! secret-named keys, name/value pairs, flags, bearer credentials, JWTs, vendor tokens, PEM
//! blocks, URL userinfo and query parameters, random-looking tokens, a script's literals)
//! sent through every kind of record (tool calls, refused or answered, a script and its
//! calls, a resource read, a prompt, a completion, a task, a question's answer, a session
//! label) is found neither in the journal's files (the database and its WAL, as bytes) nor
//! in what `mcpx log --json` and `/v1/log` print.

use std::time::Duration;

use mcpx_e2e::{Daemon, Home, Modern, config, fakemcp, poll, tag};
use serde_json::{Value, json};

const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJlMmUifQ.e2eSignatureValue42";
const SESSION_JWT: &str = "eyJhbGciOiJub25lIn0.eyJzZXNzIjoiZTJlIn0.sessionSigValue47";
const PEM_BODY: &str = "MIIE2e2ePemBodyValue";

/// Every secret the corpus holds, each a string found nowhere else.
const SECRETS: [&str; 29] = [
    "hunter2-e2e-pw",
    "pwd-value-x81",
    "bearer-key-value-19",
    "jwt-key-value-27",
    "apikey-value-33",
    "xauth-value-41",
    "cookie-value-52",
    "private-key-value-63",
    "cred-value-74",
    "pair-value-85",
    "header-value-96",
    "bearerTextValue1234",
    "e2eSignatureValue42",
    "sk-proj-e2eSecretValue0123456789",
    "ghp_e2eGithubTokenValue0123456789ab",
    PEM_BODY,
    "userinfo-pass-58",
    "query-token-69",
    "Zq8Lr2Mn5Xv7Kp1Ty3Wb9Cd4Fg6Hj0Sa",
    "flag-secret-70",
    "envtext-secret-81",
    "script-literal-token-92",
    "hunter2-completion-03",
    "prompt-secret-14",
    "uri-user-pass-25",
    "uri-query-tok-36",
    "sessionSigValue47",
    "serverNameSecret58",
    "taskLabelSecret91",
];

/// Arguments holding one of each shape of secret.
fn corpus() -> Value {
    json!({
        "query": "weather in Paris",
        "password": "hunter2-e2e-pw",
        "PWD": "pwd-value-x81",
        "bearer": "bearer-key-value-19",
        "jwt": "jwt-key-value-27",
        "api_key": "apikey-value-33",
        "X-Auth-Token": "xauth-value-41",
        "Cookie": "cookie-value-52",
        "private_key": "private-key-value-63",
        "credentials": { "user": "ada", "pass": "cred-value-74" },
        "env": [{ "name": "API_KEY", "value": "pair-value-85" }, { "name": "HOME", "value": "/home/ada" }],
        "headers": [{ "key": "Authorization", "value": "Token header-value-96" }],
        "note": "send it with Bearer bearerTextValue1234 please",
        "blob": JWT,
        "text": "sk-proj-e2eSecretValue0123456789",
        "other": "ghp_e2eGithubTokenValue0123456789ab",
        "pem": format!("-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"),
        "url": "https://ada:userinfo-pass-58@example.com/x",
        "link": "https://example.com/x?access_token=query-token-69&q=1",
        "data": "Zq8Lr2Mn5Xv7Kp1Ty3Wb9Cd4Fg6Hj0Sa",
        "argv": ["--password", "flag-secret-70", "--verbose"],
        "shell": "export GITHUB_TOKEN=envtext-secret-81",
    })
}

/// The bytes of `home`'s journal files, as text (lossy: a secret is ASCII).
fn journal_bytes(home: &Home) -> String {
    ["journal.sqlite", "journal.sqlite-wal"]
        .iter()
        .filter_map(|name| std::fs::read(home.state_dir().join(name)).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .collect()
}

#[track_caller]
fn assert_no_secret(place: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{place} holds {secret:?}");
    }
}

#[test]
fn redacted_keeps_no_secret_shape_from_any_kind_of_record() {
    const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    let servers = [
        ("up", fakemcp("global", &tag(), &[])),
        ("fx", fakemcp("global", &tag(), &["--fixture", "conformance"])),
        ("old", fakemcp("global", &tag(), &["--fixture", "conformance", "--era", "legacy"])),
    ];
    let mut cfg = config(&servers);
    cfg["journal"] = json!({ "arguments": "redacted" });
    let mut daemon = Daemon::start(&cfg);
    let url = daemon.url().to_owned();

    // Tool calls: answered, through mcpx_call and in a script; refused, naming secrets.
    Modern::mcpx_call("up", "echo", corpus()).session(SESSION_JWT).send(&url).structured();
    let script =
        format!("const token = 'script-literal-token-92'; await tools.up.echo({}); return token.length;", corpus());
    let ran = Modern::tools_call("mcpx_exec", json!({ "script": script })).send(&url);
    assert!(ran.result().is_object(), "{ran}");
    let refused = Modern::mcpx_call("Bearer serverNameSecret58", "https://ada:uri-user-pass-25@x/", corpus());
    refused.send(&url).assert_error(200, -32602);
    // A resource, a prompt, a completion.
    let uri = "https://ada:uri-user-pass-25@example.com/r?token=uri-query-tok-36";
    Modern::new("resources/read", json!({ "uri": uri })).send(&url);
    Modern::new("prompts/get", json!({ "name": "greet", "arguments": { "token": "prompt-secret-14" } })).send(&url);
    let completion = json!({ "ref": { "type": "ref/prompt", "name": "greet" },
                             "argument": { "name": "password", "value": "hunter2-completion-03" } });
    Modern::new("completion/complete", completion).send(&url);
    // A task.
    let tasks = json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    let task = Modern::mcpx_call("fx", "slow_compute", json!({ "seconds": 0.1, "label": "Bearer taskLabelSecret91" }))
        .meta(CAPABILITIES, tasks)
        .send(&url);
    assert_eq!(task.result()["resultType"], "task", "{task}");
    // A question, answered with a secret.
    let ask = |extra: Value| {
        let mut params = json!({ "name": "mcpx_call",
            "arguments": { "server": "old", "tool": "test_elicitation", "arguments": { "message": "Password?" } } });
        for (key, value) in extra.as_object().into_iter().flatten() {
            params[key] = value.clone();
        }
        Modern::new("tools/call", params).meta(CAPABILITIES, json!({ "elicitation": {} })).session("q")
    };
    let asked = ask(json!({})).send(&url);
    let asked = asked.result();
    let key = asked["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).expect("a question");
    let answer = json!({ "action": "accept", "content": { "response": "Bearer bearerTextValue1234", "password": "hunter2-e2e-pw" } });
    let retry = json!({ "inputResponses": { key: answer }, "requestState": asked["requestState"] });
    assert_eq!(ask(retry).send(&url).result()["resultType"], "complete");

    // Every kind was journaled, the arguments kept and masked.
    let home = daemon.home();
    let log = || home.cli(&["log", "--json", "--limit", "100"]);
    let kinds = ["tools/call", "resources/read", "prompts/get", "completion/complete"];
    let journaled = poll(Duration::from_secs(20), || {
        let out = log();
        let lines: Vec<Value> = out.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let all = kinds.iter().all(|k| lines.iter().any(|r| r["method"] == *k)) && lines.len() >= 10;
        all.then_some((out.stdout, lines))
    });
    let (printed, lines) = journaled.unwrap_or_else(|| panic!("not every kind was journaled:\n{}", log().stdout));
    assert_no_secret("mcpx log --json", &printed);
    let api = home.v1("GET", "/v1/log?limit=1000", None);
    assert_no_secret("/v1/log", &api.body);
    assert_no_secret("the journal's files", &journal_bytes(home));

    let echo = lines.iter().find(|r| r["name"] == "echo" && !r["inScript"].as_bool().unwrap_or(true));
    let kept = echo.and_then(|r| r["arguments"].as_str()).unwrap_or_else(|| panic!("no echo's arguments: {printed}"));
    assert!(kept.contains("[redacted]") && kept.contains("weather in Paris"), "{kept}");
    let exec = lines.iter().find(|r| r["name"] == "mcpx_exec").and_then(|r| r["arguments"].as_str());
    assert!(exec.is_some_and(|a| a.contains("[script: ")), "the script's arguments: {exec:?}");
    daemon.stop();
    assert_no_secret("the journal's file once closed", &journal_bytes(daemon.home()));
}

/// By default (`journal.arguments: none`) no arguments are kept, and the names a caller
/// chooses keep no secret either: a resource's URI loses its userinfo and its secret query
/// parameters, a tool named like a token is masked.
#[test]
fn by_default_the_names_a_caller_chooses_keep_no_secret() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let url = daemon.url();
    let uri = "https://ada:uri-user-pass-25@example.com/r?token=uri-query-tok-36&page=2";
    Modern::new("resources/read", json!({ "uri": uri })).send(url);
    Modern::mcpx_call("up", "ghp_e2eGithubTokenValue0123456789ab", json!({})).send(url);
    let home = daemon.home();
    let found = poll(Duration::from_secs(20), || {
        let out = home.cli(&["log", "--json"]).stdout;
        (out.lines().count() >= 2).then_some(out)
    });
    let printed = found.unwrap_or_else(|| panic!("the two requests were not journaled"));
    assert_no_secret("mcpx log --json", &printed);
    assert_no_secret("the journal's files", &journal_bytes(home));
    assert!(printed.contains("https://[redacted]@example.com/r?token=[redacted]&page=2"), "{printed}");
}

/// A secret written as text keeps nothing however it is quoted or named: a value in single
/// quotes, backticks or double quotes with spaces, JSON written inside JSON, an
/// `Authorization` header of any scheme, a `Cookie` header's every pair, a signed URL's
/// `sig`, a `pass` key, a flag's quoted words, `curl -u user:password`. Each of these slipped past the masking before, in a tool call's arguments and in
/// a resource's URI.
#[test]
fn a_secret_is_masked_however_it_is_quoted_and_whatever_its_header_scheme() {
    const QUOTED: [&str; 12] = [
        "quotedPw-e2e-11",
        "shellQuoted-e2e-12",
        "customScheme-e2e-22",
        "oktaValue-e2e-23",
        "horse-e2e-33",
        "nestedJson-e2e-44",
        "sasSig-e2e-55",
        "passValue-e2e-66",
        "flagWords-e2e-77",
        "uriSig-e2e-88",
        "cookiePair-e2e-89",
        "curlUserPass-e2e-90",
    ];
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["journal"] = json!({ "arguments": "redacted" });
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let arguments = json!({
        "config": "password = 'quotedPw-e2e-11'",
        "shell": "export GITHUB_TOKEN='shellQuoted-e2e-12'",
        "curl": "curl -H 'Authorization: ApiKey customScheme-e2e-22' https://api.example.com",
        "okta": "Authorization: SSWS oktaValue-e2e-23",
        "yaml": "password: \"correct horse-e2e-33\"",
        "body": r#"{\"client_secret\": \"nestedJson-e2e-44\"}"#,
        "link": "https://acct.blob.example.com/c/b?sv=2022&sig=sasSig-e2e-55",
        "pass": "passValue-e2e-66",
        "command": "tool --password 'two flagWords-e2e-77'",
        "sent": "Cookie: theme=dark; sid=cookiePair-e2e-89",
        "fetch": "curl -u ada:curlUserPass-e2e-90 https://api.example.com/v1",
    });
    Modern::mcpx_call("up", "echo", arguments).send(url).structured();
    Modern::new("resources/read", json!({ "uri": "https://example.com/r?sig=uriSig-e2e-88&page=2" })).send(url);

    let home = daemon.home();
    let found = poll(Duration::from_secs(20), || {
        let out = home.cli(&["log", "--json"]).stdout;
        let both = out.contains("\"echo\"") && out.contains("resources/read");
        both.then_some(out)
    });
    let printed = found.unwrap_or_else(|| panic!("the call and the read were not journaled"));
    let api = home.v1("GET", "/v1/log?limit=100", None).body;
    let files = journal_bytes(home);
    for (place, text) in [("mcpx log --json", &printed), ("/v1/log", &api), ("the journal's files", &files)] {
        for secret in QUOTED {
            assert!(!text.contains(secret), "{place} holds {secret:?}");
        }
    }
    assert!(printed.contains("page=2") && printed.contains("api.example.com"), "{printed}");
}
