//! Questions a handshake-era upstream asks mid-call, on an instance shared by several
//! handshake-era callers (global scope): a question reaches only the caller whose call it
//! serves. Over stdio the upstream names that call by echoing its invocation `callId`;
//! one that names none is refused while more than one caller has requests in flight, and
//! put to the caller when it is the only one. An HTTP upstream's question on a request's
//! own stream goes to that request's caller.
//!
//! Each caller is a legacy Streamable HTTP session that declared `elicitation`, reading its
//! calls' SSE response streams, where mcpx puts the questions.

use std::cell::RefCell;
use std::time::Duration;

use mcpx_e2e::client::Raw;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use mcpx_e2e::schema::LEGACY;
use mcpx_e2e::upstreams::{RawPost, ScriptServer};
use serde_json::{Value, json};

/// How long a frame that should come may take.
const WITHIN: Duration = Duration::from_secs(15);

/// A handshake-era HTTP session that can be asked to elicit.
#[derive(Clone)]
struct Caller {
    url: String,
    session: String,
}

impl Caller {
    #[track_caller]
    fn open(url: &str) -> Caller {
        let mut caller = Caller { url: url.to_owned(), session: String::new() };
        let reply = caller.post(
            json!({"jsonrpc": "2.0", "id": mcpx_e2e::client::next_id(), "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "mcpx-e2e", "version": "0"}}}),
            Some("initialize"),
        );
        caller.session = reply.header("mcp-session-id").expect("initialize minted a session").to_owned();
        let ack = caller
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some("notifications/initialized"));
        assert_eq!(ack.status, 202, "{ack}");
        caller
    }

    fn headers(&self) -> Vec<(String, String)> {
        [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", self.session.as_str()),
            ("MCP-Protocol-Version", LEGACY),
        ]
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
    }

    #[track_caller]
    fn post(&self, frame: Value, method: Option<&str>) -> mcpx_e2e::client::Reply {
        Raw {
            http_method: "POST",
            url: &self.url,
            headers: self.headers(),
            body: Some(frame.to_string().into_bytes()),
            revision: LEGACY,
            method,
        }
        .send()
    }

    /// Starts `mcpx_call` of `server`'s `tool`; its response stream is read as it comes.
    #[track_caller]
    fn call(&self, server: &str, tool: &str, arguments: Value) -> Stream {
        self.call_with_meta(server, tool, arguments, json!({}))
    }

    #[track_caller]
    fn call_with_meta(&self, server: &str, tool: &str, arguments: Value, meta: Value) -> Stream {
        let frame = json!({"jsonrpc": "2.0", "id": mcpx_e2e::client::next_id(), "method": "tools/call", "params": {
            "name": "mcpx_call", "arguments": {"server": server, "tool": tool, "arguments": arguments}, "_meta": meta}});
        let post = RawPost::send(&self.url, LEGACY, &self.headers(), &frame);
        assert_eq!(post.status(), 200, "{:?}", post.head);
        Stream { post, seen: Vec::new() }
    }

    /// Answers a question mcpx put to this caller.
    #[track_caller]
    fn answer(&self, question: &Value, result: Value) {
        let ack = self.post(json!({"jsonrpc": "2.0", "id": question["id"], "result": result}), None);
        assert_eq!(ack.status, 202, "the answer was not accepted: {ack}");
    }
}

/// One call's SSE response stream, and every frame read from it so far.
struct Stream {
    post: RawPost,
    seen: Vec<Value>,
}

impl Stream {
    #[track_caller]
    fn read_until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        let seen = RefCell::new(Vec::new());
        let frame = self.post.read_until(WITHIN, |f| {
            seen.borrow_mut().push(f.clone());
            wanted(f)
        });
        self.seen.extend(seen.into_inner());
        frame
    }

    #[track_caller]
    fn question(&mut self) -> Value {
        self.read_until(|f| f["method"] == "elicitation/create")
    }

    /// The call's answer: the last event of a stream, or the whole of a JSON reply.
    #[track_caller]
    fn answer(&mut self) -> Value {
        let json = self.post.head.iter().any(|h| h.to_ascii_lowercase().starts_with("content-type: application/json"));
        if !json {
            return self.read_until(|f| f.get("result").is_some() || f.get("error").is_some());
        }
        self.post.rest();
        let frame: Value = serde_json::from_str(&self.post.lines.concat()).expect("a JSON reply");
        mcpx_e2e::schema::assert_frame(LEGACY, Some("tools/call"), &frame);
        self.seen.push(frame.clone());
        frame
    }

    /// The messages of the questions this stream carried.
    fn questions(&self) -> Vec<&Value> {
        self.seen.iter().filter(|f| f["method"] == "elicitation/create").map(|f| &f["params"]["message"]).collect()
    }
}

fn shared_fixture(extra: &[&str]) -> Daemon {
    let mut args = vec!["--fixture", "conformance", "--era", "legacy"];
    args.extend_from_slice(extra);
    Daemon::start(&config(&[("fx", fakemcp("global", &tag(), &args))]))
}

fn elicit(message: &str) -> Value {
    json!({"message": message})
}

fn accept(response: &str) -> Value {
    json!({"action": "accept", "content": {"response": response}})
}

fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default()
}

/// B's call started first, so the old rule ("the oldest request in flight") would hand A's
/// question to B; the upstream names no call, so mcpx cannot tell and refuses it.
#[test]
fn a_question_naming_no_call_while_two_callers_share_the_instance_is_refused_and_reaches_neither() {
    let daemon = shared_fixture(&[]);
    let (a, b) = (Caller::open(daemon.url()), Caller::open(daemon.url()));
    let mut b_call = b.call("fx", "test_elicitation", elicit("for B"));
    // B alone: its question is put to it (and left open, so B's call stays in flight).
    let b_question = b_call.question();
    assert_eq!(b_question["params"]["message"], "for B");

    let mut a_call = a.call("fx", "test_elicitation", elicit("for A"));
    let a_answer = a_call.answer();
    assert_eq!(a_answer["result"]["isError"], true, "{a_answer}");
    let reason = text_of(&a_answer);
    assert!(
        reason.contains("ambiguous among 2 callers") && reason.contains("callId"),
        "the upstream was not told why: {a_answer}"
    );
    assert!(a_call.questions().is_empty(), "A was asked: {:?}", a_call.seen);

    b.answer(&b_question, accept("from B"));
    let b_answer = b_call.answer();
    assert!(text_of(&b_answer).contains("from B"), "{b_answer}");
    assert_eq!(b_call.questions(), vec!["for B"], "B saw a question not its own");
}

#[test]
fn a_question_naming_its_call_reaches_only_that_callers_stream_and_its_answer_only_that_call() {
    let daemon = shared_fixture(&["--echo-call-id"]);
    let (a, b) = (Caller::open(daemon.url()), Caller::open(daemon.url()));
    let mut b_call = b.call("fx", "test_elicitation", elicit("for B"));
    let b_question = b_call.question();
    let mut a_call = a.call("fx", "test_elicitation", elicit("for A"));
    let a_question = a_call.question();
    assert_eq!(a_question["params"]["message"], "for A", "{a_question}");
    assert_eq!(b_question["params"]["message"], "for B", "{b_question}");
    assert!(a_question["params"].get("_meta").is_none(), "mcpx's own keys reached the caller: {a_question}");

    a.answer(&a_question, accept("from A"));
    let a_answer = a_call.answer();
    assert!(text_of(&a_answer).contains("from A"), "{a_answer}");
    b.answer(&b_question, accept("from B"));
    let b_answer = b_call.answer();
    assert!(text_of(&b_answer).contains("from B"), "{b_answer}");
    assert_eq!(a_call.questions(), vec!["for A"]);
    assert_eq!(b_call.questions(), vec!["for B"]);
}

/// The common case stays as it was: a caller alone on an instance is asked, even with
/// more than one of its calls in flight (at its oldest call that can carry a question).
#[test]
fn a_caller_alone_on_the_instance_with_two_calls_in_flight_is_asked_without_a_named_call() {
    let daemon = shared_fixture(&[]);
    let a = Caller::open(daemon.url());
    let mut first = a.call("fx", "test_elicitation", elicit("first"));
    let first_question = first.question();
    // The second call's reply starts only with its answer: its question is put on the
    // first call's stream, the caller's oldest.
    let second = {
        let a = a.clone();
        std::thread::spawn(move || a.call("fx", "test_elicitation", elicit("second")).answer())
    };
    let second_question = first.question();
    assert_eq!(second_question["params"]["message"], "second", "{second_question}");

    a.answer(&second_question, accept("two"));
    assert!(text_of(&second.join().expect("the second call")).contains("two"));
    a.answer(&first_question, accept("one"));
    assert!(text_of(&first.answer()).contains("one"));
}

/// An HTTP upstream sends its question on the response stream of the request it serves:
/// that request's caller is asked, though another caller's request was in flight first.
#[test]
fn an_http_upstreams_question_on_a_requests_stream_reaches_that_requests_caller() {
    let server = ScriptServer::everything_http();
    let daemon = Daemon::start(&json!({"mcpServers": {"everything": {"url": server.url(), "scope": "global"}}}));
    let (a, b) = (Caller::open(daemon.url()), Caller::open(daemon.url()));
    let long = json!({"duration": 4, "steps": 4});
    let mut b_call =
        b.call_with_meta("everything", "trigger-long-running-operation", long, json!({"progressToken": "b"}));
    // B's request is in flight on the instance once the upstream reports progress on it.
    b_call.read_until(|f| f["method"] == "notifications/progress");
    let mut a_call = a.call("everything", "trigger-elicitation-request", json!({}));
    let a_question = a_call.question();
    assert!(a_question["params"]["requestedSchema"]["properties"].get("name").is_some(), "{a_question}");
    a.answer(&a_question, json!({"action": "decline"}));
    let a_answer = a_call.answer();
    assert!(text_of(&a_answer).contains("declined"), "{a_answer}");

    let b_answer = b_call.answer();
    assert!(b_answer.get("result").is_some(), "{b_answer}");
    assert!(b_call.questions().is_empty(), "B saw A's question: {:?}", b_call.seen);
}

fn standalone_asker() -> (ScriptServer, Daemon) {
    let server = ScriptServer::start("standalone_question_server.py", &[]);
    let daemon = Daemon::start(&json!({"mcpServers": {"sq": {"url": server.url(), "scope": "global"}}}));
    (server, daemon)
}

/// An HTTP upstream's question on its session's standalone stream names no request: with
/// two callers' requests in flight it is refused (it used to go to the oldest of them).
#[test]
fn an_http_upstreams_question_on_its_standalone_stream_is_refused_while_two_callers_have_requests_in_flight() {
    let (_server, daemon) = standalone_asker();
    let (a, b) = (Caller::open(daemon.url()), Caller::open(daemon.url()));
    let mut b_call = b.call_with_meta("sq", "hold", json!({"seconds": 3}), json!({"progressToken": "b"}));
    b_call.read_until(|f| f["method"] == "notifications/progress");

    let mut a_call = a.call("sq", "ask", json!({}));
    let a_answer = a_call.answer();
    let told = text_of(&a_answer);
    assert!(told.starts_with("refused: -32602") && told.contains("ambiguous among 2 callers"), "{a_answer}");
    assert!(a_call.questions().is_empty(), "A was asked: {:?}", a_call.seen);
    let b_answer = b_call.answer();
    assert_eq!(text_of(&b_answer), "held", "{b_answer}");
    assert!(b_call.questions().is_empty(), "B saw A's question: {:?}", b_call.seen);
}

#[test]
fn an_http_upstreams_question_on_its_standalone_stream_reaches_the_only_caller_in_flight() {
    let (_server, daemon) = standalone_asker();
    let a = Caller::open(daemon.url());
    let mut a_call = a.call("sq", "ask", json!({}));
    let question = a_call.question();
    assert_eq!(question["params"]["message"], "Asked on the standalone stream", "{question}");
    a.answer(&question, accept("from A"));
    let a_answer = a_call.answer();
    assert!(text_of(&a_answer).starts_with("answered:") && text_of(&a_answer).contains("from A"), "{a_answer}");
}
