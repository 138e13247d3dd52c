//! Code mode: `mcpx_exec` runs a script that calls tools of several upstreams with the
//! caller's identity, in a sandbox whose limits hold, and keeps artifacts per session.

use mcpx_e2e::python::venv_bin;
use mcpx_e2e::{Daemon, LegacySession, Modern, Whoami, assert_serving, config, fakemcp, tag};
use serde_json::{Value, json};

const CONTEXT: &str = "dev.mcpx/invocation";

fn exec(script: &str) -> Modern {
    Modern::tools_call("mcpx_exec", json!({ "script": script }))
}

/// `a` global and `b` session-scoped fakemcp, and the real `mcp-server-time`.
fn three_servers(tag: &str) -> Value {
    let mut c = config(&[
        ("a", fakemcp("global", tag, &[])),
        ("b", fakemcp("session", tag, &[])),
        ("time", json!({"command": venv_bin("mcp-server-time"), "args": ["--local-timezone", "UTC"]})),
    ]);
    c["exec"] = json!({ "memoryBytes": 16 * 1024 * 1024 });
    c
}

/// The text of the first content block of a tool result.
fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn a_script_calls_three_upstreams_and_returns_the_small_object_it_builds() {
    let t = tag();
    let daemon = Daemon::start(&three_servers(&t));
    let script = r#"
        const [now, seenByA] = await Promise.all([
            tools.time.get_current_time({ timezone: "Europe/Berlin" }),
            tools.a.meta(),
        ]);
        const b = await call("b", "whoami", {});
        const seenByB = await tools.b.meta({});
        console.log("b answered from pid", b.pid);
        return {
            timezone: now.timezone,
            hasTime: typeof now.datetime === "string",
            callIds: [seenByA.meta["dev.mcpx/invocation"].callId, seenByB.meta["dev.mcpx/invocation"].callId],
            scopeOfB: seenByB.meta["dev.mcpx/invocation"].scope,
            pidOfB: b.pid,
        };"#;
    let reply = exec(script).session("alice").meta(CONTEXT, json!({"callId": "forged-call"})).send(daemon.url());
    let out = reply.structured();
    assert_eq!(out["timezone"], "Europe/Berlin", "{reply}");
    assert_eq!(out["hasTime"], true, "{reply}");
    assert_eq!(out["scopeOfB"], "session:alice", "the script ran as its caller's session:\n{reply}");
    let ids = out["callIds"].as_array().expect("two call ids");
    assert_eq!(ids[0], ids[1], "every upstream request of one script carries the exec's one call id:\n{reply}");
    assert!(ids[0].as_str().is_some_and(|id| id.len() == 32 && id != "forged-call"), "{reply}");
    let logs = reply.result()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(logs.contains(&format!("b answered from pid {}", out["pidOfB"])), "console output comes back:\n{reply}");
    // The text form of the result is the same object, for clients that read only text.
    assert_eq!(serde_json::from_str::<Value>(text(reply.result())).unwrap(), *out);

    let again =
        exec("return (await tools.a.meta()).meta[\"dev.mcpx/invocation\"].callId;").session("alice").send(daemon.url());
    assert_ne!(json!(text(again.result())), ids[0], "another exec is another call");
}

#[test]
fn a_failing_tool_call_throws_an_error_the_script_can_catch() {
    let t = tag();
    let daemon = Daemon::start(&three_servers(&t));
    let script = r#"
        const caught = [];
        try { await tools.a.fail({ message: "boom-17" }); } catch (e) { caught.push({ message: e.message, server: e.server, tool: e.tool }); }
        try { await tools.nosuch.thing(); } catch (e) { caught.push({ message: e.message }); }
        try { await tools.a.nosuch(); } catch (e) { caught.push({ message: e.message }); }
        return { caught };"#;
    let reply = exec(script).send(daemon.url());
    let caught = reply.structured()["caught"].as_array().expect("caught").clone();
    assert_eq!(caught[0]["server"], "a", "{reply}");
    assert_eq!(caught[0]["tool"], "fail", "{reply}");
    assert!(caught[0]["message"].as_str().unwrap().contains("boom-17"), "{reply}");
    assert!(caught[1]["message"].as_str().unwrap().contains("no server named \"nosuch\""), "{reply}");
    assert!(caught[2]["message"].as_str().unwrap().contains("has no tool \"nosuch\""), "{reply}");

    // Not caught, the error ends the script as an error result naming it.
    let uncaught = exec("await tools.a.fail({ message: 'boom-18' });").send(daemon.url());
    assert_eq!(uncaught.result()["isError"], true, "{uncaught}");
    assert!(text(uncaught.result()).contains("boom-18"), "{uncaught}");
}

#[test]
fn scripts_past_their_limits_are_stopped_and_the_daemon_serves_on() {
    let t = tag();
    let daemon = Daemon::start(&three_servers(&t));
    let url = daemon.url();
    let stopped = |script: &str, timeout_ms: u64| {
        let reply = Modern::tools_call("mcpx_exec", json!({ "script": script, "timeoutMs": timeout_ms })).send(url);
        let result = reply.result().clone();
        assert_eq!(result["isError"], true, "{reply}");
        (
            result["structuredContent"]["error"]["limit"].as_str().unwrap_or_default().to_owned(),
            text(&result).to_owned(),
        )
    };

    let (limit, message) = stopped("while (true) {}", 500);
    assert_eq!(limit, "timeoutMs", "a busy loop with no await is stopped: {message}");
    assert!(message.contains("500 ms"), "{message}");
    let (limit, _) = stopped("for (;;) { await tools.a.echo({}); }", 500);
    assert!(limit == "timeoutMs" || limit == "maxToolCalls", "a loop of tool calls is stopped: {limit}");
    let (limit, _) = stopped("for (;;) { try { await new Promise(r => r()); } catch {} }", 500);
    assert_eq!(limit, "timeoutMs");
    let (limit, message) = stopped("const hoard = []; for (;;) hoard.push('x'.repeat(65536) + hoard.length);", 20_000);
    assert_eq!(limit, "memoryBytes", "allocation without bound stops at the memory limit: {message}");
    assert!(message.contains("exec.memoryBytes"), "{message}");

    assert_serving(url);
    let fine = exec("return 6 * 7;").send(url);
    assert_eq!(text(fine.result()), "42", "{fine}");
}

#[test]
fn each_session_reaches_its_own_instances_and_sees_only_its_own_artifacts() {
    let t = tag();
    let daemon = Daemon::start(&three_servers(&t));
    let url = daemon.url();
    let script = |who: &str| {
        format!(
            r#"const me = await tools.b.whoami();
               const uri = await artifact("{who}.txt", "notes of {who}");
               return {{ instance: me.instance, uri }};"#
        )
    };
    let alice = exec(&script("alice")).session("alice").send(url);
    let bob = exec(&script("bob")).session("bob").send(url);
    let (alice_out, bob_out) = (alice.structured(), bob.structured());
    assert_ne!(alice_out["instance"], bob_out["instance"], "each session's script reached its own instance of b");
    let again = Whoami::of(&Modern::mcpx_call("b", "whoami", json!({})).session("alice").send(url));
    assert_eq!(json!(again.instance), alice_out["instance"], "alice's script used alice's instance");
    let alice_uri = alice_out["uri"].as_str().unwrap().to_owned();
    assert!(alice_uri.starts_with("mcpx://artifacts/"), "{alice}");
    let link = alice.result()["content"].as_array().unwrap().iter().find(|c| c["type"] == "resource_link").cloned();
    assert_eq!(link.as_ref().map(|l| &l["uri"]), Some(&json!(alice_uri)), "the result links the artifact:\n{alice}");

    let listed = |reply: &mcpx_e2e::Reply| -> Vec<String> {
        assert_eq!(reply.result()["ttlMs"], 0, "{reply}");
        assert_eq!(reply.result()["cacheScope"], "private", "{reply}");
        let resources = reply.result()["resources"].as_array().unwrap();
        resources
            .iter()
            .filter_map(|r| r["uri"].as_str())
            .filter(|u| u.starts_with("mcpx://artifacts/"))
            .map(str::to_owned)
            .collect()
    };
    let list = |session: Option<&str>| {
        let request = Modern::new("resources/list", json!({}));
        match session {
            Some(s) => request.session(s).send(url),
            None => request.send(url),
        }
    };
    assert_eq!(listed(&list(Some("alice"))), vec![alice_uri.clone()]);
    assert_eq!(listed(&list(Some("bob"))), vec![bob_out["uri"].as_str().unwrap().to_owned()]);
    assert!(listed(&list(None)).is_empty(), "a caller with no session lists no artifacts");

    let read = |session: &str| Modern::new("resources/read", json!({ "uri": alice_uri })).session(session).send(url);
    let mine = read("alice");
    assert_eq!(mine.result()["contents"][0]["text"], "notes of alice", "{mine}");
    let theirs = read("bob");
    let error = theirs.assert_error(200, -32602);
    assert_eq!(
        error["data"]["uri"],
        json!(alice_uri),
        "another session's artifact reads as if it did not exist:\n{theirs}"
    );

    // A handshake-era session owns artifacts too, through its transport session.
    let legacy = LegacySession::open(url);
    let made =
        legacy.tools_call("mcpx_exec", json!({ "script": "return { uri: await artifact('l.json', { ok: true }) };" }));
    let uri = made.result()["structuredContent"]["uri"].as_str().expect("an artifact uri").to_owned();
    let listed = legacy.request("resources/list", json!({}));
    let uris: Vec<&str> =
        listed.result()["resources"].as_array().unwrap().iter().filter_map(|r| r["uri"].as_str()).collect();
    assert_eq!(uris.iter().filter(|u| u.starts_with("mcpx://artifacts/")).collect::<Vec<_>>(), vec![&uri.as_str()]);
    let read = legacy.request("resources/read", json!({ "uri": uri }));
    assert_eq!(read.result()["contents"][0]["text"], r#"{"ok":true}"#, "{read}");

    // An unnamed caller's script cannot keep one: nothing could ever read it back.
    let unnamed = exec("try { await artifact('x', 'y'); return 'kept'; } catch (e) { return e.message; }").send(url);
    assert!(text(unnamed.result()).contains("belong to a session"), "{unnamed}");
}

#[test]
fn scripts_cannot_reach_the_host_or_escape_the_sandbox() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("a", fakemcp("global", &t, &[]))]));
    let probe = |expression: &str| -> String {
        let script = format!(
            "try {{ const v = await ({expression}); return 'reached: ' + typeof v; }} catch (e) {{ return 'refused: ' + e.message; }}"
        );
        let reply = exec(&script).send(daemon.url());
        text(reply.result()).to_owned()
    };
    for (expression, refusal) in [
        ("require('fs')", "require is not defined"),
        ("process.env", "process is not defined"),
        ("Deno.readTextFile('/etc/passwd')", "Deno is not defined"),
        ("fetch('http://127.0.0.1/')", "fetch is not defined"),
        ("import('/etc/passwd')", "could not load module"),
        ("globalThis.std.loadFile('/etc/passwd')", "of undefined"),
        ("globalThis.os.exec(['true'])", "of undefined"),
        ("(0, eval)('this').process.exit()", "of undefined"),
        ("Function('return this')().require('fs')", "not a function"),
    ] {
        let answer = probe(expression);
        assert!(
            answer.starts_with("refused: ") && answer.contains(refusal),
            "{expression} gave {answer:?}, expected {refusal:?}"
        );
    }
    let overwrite = exec("try { tools = {}; } catch (e) { return e.name; } return 'overwritten';").send(daemon.url());
    assert_eq!(text(overwrite.result()), "TypeError", "the host's globals cannot be replaced:\n{overwrite}");
}

#[test]
fn mcpx_exec_runs_scripts_from_the_shell_and_mcpx_artifact_manages_what_they_keep() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("a", fakemcp("global", &t, &[]))]));
    let home = daemon.home();
    let script_file = home.root().join("sum.js");
    std::fs::write(&script_file, "const r = await tools.a.echo({ n: 40 }); return { sum: r.n + 2 };").unwrap();
    let run = home.cli(&["exec", "-f", script_file.to_str().unwrap(), "--json"]);
    run.assert_code(0);
    assert_eq!(run.json()["structuredContent"], json!({ "sum": 42 }), "{run}");

    let failed = home.cli(&["exec", "throw new Error('boom-31')"]);
    failed.assert_code(1);
    assert!(failed.stdout.contains("boom-31"), "{failed}");
    let timed_out = home.cli(&["exec", "--timeout-ms", "300", "while (true) {}"]);
    timed_out.assert_code(124);
    assert!(timed_out.stderr.contains("time limit (300 ms)"), "{timed_out}");

    let kept = home.cli(&["exec", "--session", "shell-1", "return await artifact('hello.txt', 'hello from a script')"]);
    kept.assert_code(0);
    let uri = kept.stdout.lines().next().unwrap_or_default().trim().to_owned();
    assert!(uri.starts_with("mcpx://artifacts/"), "{kept}");
    let listed = home.cli(&["artifact", "ls", "--session", "shell-1"]);
    assert!(listed.stdout.contains(&uri) && listed.stdout.contains("hello.txt"), "{listed}");
    let other = home.cli(&["artifact", "ls", "--session", "shell-2"]);
    assert!(!other.stdout.contains(&uri), "{other}");
    let got = home.cli(&["artifact", "get", &uri, "--session", "shell-1"]);
    got.assert_code(0);
    assert_eq!(got.stdout, "hello from a script");
    home.cli(&["artifact", "get", &uri, "--session", "shell-2"]).assert_code(1);
    home.cli(&["artifact", "rm", &uri, "--session", "shell-1"]).assert_code(0);
    home.cli(&["artifact", "get", &uri, "--session", "shell-1"]).assert_code(1);
}

#[test]
fn scripts_over_exec_max_concurrent_or_max_tool_calls_are_refused_naming_the_setting() {
    let t = tag();
    let mut c = config(&[("a", fakemcp("global", &t, &[]))]);
    c["exec"] = json!({ "maxConcurrent": 1, "maxToolCalls": 3 });
    let daemon = Daemon::start(&c);
    let url = daemon.url().to_owned();

    // One script holds the only slot while its tool call sleeps; a second is refused.
    let holder = {
        let url = url.clone();
        std::thread::spawn(move || exec("return await tools.a.slow({ ms: 3000 });").send(&url))
    };
    // Its tool call is in flight: the script holds the slot.
    assert!(
        daemon.home().wait_in_use("a", 1, std::time::Duration::from_secs(10)),
        "the first script's call never started"
    );
    let refused = exec("return 1;").send(&url);
    let error = refused.assert_error(200, -32603);
    assert!(error["message"].as_str().unwrap().contains("exec.maxConcurrent"), "{refused}");
    let held = holder.join().unwrap();
    assert_eq!(held.result()["structuredContent"], json!({ "sleptMs": 3000 }), "{held}");
    assert_eq!(text(exec("return 2;").send(&url).result()), "2", "the slot is free again");

    // The fourth call stops the script, even one that catches what each call throws.
    let greedy = exec("for (let i = 0; i < 10; i++) { try { await tools.a.echo({ i }); } catch {} } return 'went on';")
        .send(&url);
    assert_eq!(greedy.result()["isError"], true, "{greedy}");
    assert_eq!(greedy.result()["structuredContent"]["error"]["limit"], "maxToolCalls", "{greedy}");
    assert!(text(greedy.result()).contains("exec.maxToolCalls"), "{greedy}");
}
