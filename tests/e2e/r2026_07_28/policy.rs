//! Tool policy and per-client access: a server's `tools`/`prompts`/`resources` hide,
//! rename and redescribe its items; a `clients` entry limits a caller to servers and
//! tools and to a rate. What is hidden is absent from every listing, and naming it gets
//! exactly the error a name that does not exist gets.

use std::time::Duration;

use mcpx_e2e::process::TempDir;
use mcpx_e2e::{Daemon, LegacySession, Modern, Reply, Whoami, config, fakemcp, poll, tag};
use serde_json::{Value, json};

const CI_TOKEN: &str = "ci-token-0123456789abcdef";
const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";

/// The error of a reply, with its HTTP status, with every occurrence of `name` in its
/// strings replaced by a placeholder: two refusals that differ only in the name they were
/// asked for compare equal.
#[track_caller]
fn error_without(reply: &Reply, name: &str) -> (u16, Value) {
    fn replace(value: &Value, name: &str) -> Value {
        match value {
            // A quoted name in a message, or the bare name as a value of its own.
            Value::String(s) if s == name.trim_matches('"') => "<name>".into(),
            Value::String(s) => Value::String(s.replace(name, "<name>")),
            Value::Array(items) => items.iter().map(|v| replace(v, name)).collect(),
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), replace(v, name))).collect(),
            other => other.clone(),
        }
    }
    (reply.status, replace(reply.error(), name))
}

/// The names in a `tools/list` (or `prompts/list`) reply.
fn listed(reply: &Reply, field: &str) -> Vec<String> {
    let items = reply.result()[field].as_array().unwrap_or_else(|| panic!("no {field}:\n{reply}"));
    items.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

/// The tools an `mcpx_search` (or a script's `search()`) found, as `server/tool`.
fn found(tools: &Value) -> Vec<String> {
    let tools = tools.as_array().unwrap_or_else(|| panic!("no tools: {tools}"));
    tools.iter().map(|t| format!("{}/{}", t["server"].as_str().unwrap(), t["tool"].as_str().unwrap())).collect()
}

fn search(url: &str, query: &str, bearer: Option<&str>) -> Vec<String> {
    let mut request = Modern::tools_call("mcpx_search", json!({ "query": query }));
    if let Some(token) = bearer {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let reply = request.send(url);
    found(&reply.structured()["tools"])
}

fn exec(script: &str) -> Modern {
    Modern::tools_call("mcpx_exec", json!({ "script": script }))
}

#[test]
fn a_denied_tool_is_absent_from_every_listing_and_calling_it_is_like_calling_none() {
    let mut up = fakemcp("global", &tag(), &[]);
    up["tools"] = json!({"deny": ["who*"]});
    let mut cfg = config(&[("up", up)]);
    cfg["expose"] = json!(["up"]);
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();

    let names = listed(&Modern::tools_list().send(url), "tools");
    assert!(names.contains(&"up__echo".to_owned()) && !names.contains(&"up__whoami".to_owned()), "{names:?}");
    let everything = search(url, "", None);
    assert!(everything.contains(&"up/echo".to_owned()), "{everything:?}");
    assert!(!everything.iter().any(|t| t.contains("whoami")), "{everything:?}");
    assert_eq!(search(url, "whoami", None), Vec::<String>::new());
    let searched = exec("return { found: await search('') };").send(url);
    let in_script = found(&searched.structured()["found"]);
    assert!(in_script.contains(&"up/echo".to_owned()) && !in_script.contains(&"up/whoami".to_owned()), "{searched}");

    // Called by its exposed name, through mcpx_call or from a script: the error of a
    // tool that does not exist, word for word.
    let exposed = Modern::tools_call("up__whoami", json!({})).send(url);
    let missing = Modern::tools_call("up__nosuch", json!({})).send(url);
    assert_eq!(exposed.error_code(), -32602, "{exposed}");
    assert_eq!(error_without(&exposed, "whoami"), error_without(&missing, "nosuch"));
    let called = Modern::mcpx_call("up", "whoami", json!({})).send(url);
    let missing = Modern::mcpx_call("up", "nosuch", json!({})).send(url);
    assert_eq!(called.error_code(), -32602, "{called}");
    assert_eq!(error_without(&called, "whoami"), error_without(&missing, "nosuch"));
    let script = r#"const caught = [];
        for (const name of ["whoami", "nosuch"]) {
            try { await call("up", name, {}); } catch (e) { caught.push(e.message.split(name).join("<name>")); }
        }
        return { caught };"#;
    let reply = exec(script).send(url);
    let caught = &reply.structured()["caught"];
    assert!(caught[0].as_str().is_some_and(|m| m.contains("no tool")), "{reply}");
    assert_eq!(caught[0], caught[1], "{reply}");
}

#[test]
fn a_denied_prompt_or_resource_is_absent_and_asking_for_it_is_like_asking_for_none() {
    let mut up = fakemcp("global", &tag(), &[]);
    up["prompts"] = json!({"deny": ["me?a"]});
    up["resources"] = json!({"deny": ["fake://*"]});
    let mut open = fakemcp("global", &tag(), &[]);
    open["prompts"] = json!({"rename": {"meta": "context"}, "describe": {"meta": "What reached the server."}});
    let daemon = Daemon::start(&config(&[("up", up), ("open", open)]));
    let url = daemon.url();
    let request = |method: &str, params: Value| Modern::new(method, params).send(url);

    let prompts = request("prompts/list", json!({}));
    assert_eq!(listed(&prompts, "prompts"), ["open__context"], "{prompts}");
    assert_eq!(prompts.result()["prompts"][0]["description"], "What reached the server.");
    let hidden = request("prompts/get", json!({"name": "up__meta"}));
    let absent = request("prompts/get", json!({"name": "up__nosuch"}));
    assert_eq!(hidden.error_code(), -32602, "{hidden}");
    assert_eq!(error_without(&hidden, "up__meta"), error_without(&absent, "up__nosuch"));
    let renamed = request("prompts/get", json!({"name": "open__context"}));
    assert!(renamed.result()["messages"].is_array(), "{renamed}");
    let old = request("prompts/get", json!({"name": "open__meta"}));
    let absent = request("prompts/get", json!({"name": "open__nosuch"}));
    assert_eq!(error_without(&old, "open__meta"), error_without(&absent, "open__nosuch"));

    let resources = request("resources/list", json!({}));
    let uris: Vec<&str> =
        resources.result()["resources"].as_array().unwrap().iter().filter_map(|r| r["uri"].as_str()).collect();
    assert_eq!(uris, ["mcpx://open/fake://meta"], "{resources}");
    let hidden = request("resources/read", json!({"uri": "mcpx://up/fake://meta"}));
    let absent = request("resources/read", json!({"uri": "mcpx://up/fake://nosuch"}));
    assert_eq!(error_without(&hidden, "fake://meta"), error_without(&absent, "fake://nosuch"));
    assert!(request("resources/read", json!({"uri": "mcpx://open/fake://meta"})).result()["contents"].is_array());
}

/// Two servers keep their own names and list the same URI; the policy hides it on the
/// first. The listing shows the second's, and a read of that URI goes to the second, as
/// listed, not to the first server that has it. Hidden on both, it is as absent as a URI
/// no server has.
#[test]
fn a_read_by_own_uri_goes_to_the_server_whose_resource_was_listed() {
    let t = tag();
    let mut hides = fakemcp("global", &t, &[]);
    hides["resources"] = json!({"deny": ["fake://*"]});
    let mut cfg = config(&[("a", hides.clone()), ("b", fakemcp("global", &t, &[]))]);
    cfg["expose"] = json!(["a", "b"]);
    cfg["exposePrefix"] = json!("never");
    let daemon = Daemon::start(&cfg);
    let request = |method: &str, params: Value| Modern::new(method, params).send(daemon.url());
    let resources = request("resources/list", json!({}));
    let uris: Vec<&str> =
        resources.result()["resources"].as_array().unwrap().iter().filter_map(|r| r["uri"].as_str()).collect();
    assert_eq!(uris, ["fake://meta"], "{resources}");
    let read = request("resources/read", json!({"uri": "fake://meta"}));
    assert!(read.result()["contents"].is_array(), "{read}");

    cfg["mcpServers"]["b"] = hides;
    let daemon = Daemon::start(&cfg);
    let request = |uri: &str| Modern::new("resources/read", json!({ "uri": uri })).send(daemon.url());
    let (hidden, absent) = (request("fake://meta"), request("fake://nosuch"));
    assert_eq!(hidden.error_code(), -32602, "{hidden}");
    assert_eq!(error_without(&hidden, "fake://meta"), error_without(&absent, "fake://nosuch"));
}

#[test]
fn an_allow_list_of_globs_shows_only_the_tools_it_matches_and_deny_still_wins() {
    let mut up = fakemcp("global", &tag(), &[]);
    up["tools"] = json!({"allow": ["e*", "wh?ami"], "deny": ["echo"]});
    let daemon = Daemon::start(&config(&[("up", up)]));
    let mut tools = search(daemon.url(), "", None);
    tools.sort();
    assert_eq!(tools, ["up/env", "up/whoami"]);
    Whoami::of(&Modern::mcpx_call("up", "whoami", json!({})).send(daemon.url()));
}

#[test]
fn a_renamed_tool_is_listed_and_called_by_its_new_name_and_the_upstream_gets_its_own() {
    let mut up = fakemcp("global", &tag(), &[]);
    up["tools"] = json!({"rename": {"echo": "say"}, "describe": {"echo": "Says its arguments back."}});
    let mut cfg = config(&[("up", up)]);
    cfg["expose"] = json!(["up"]);
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();

    let list = Modern::tools_list().send(url);
    let say = list.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "up__say").cloned();
    assert_eq!(say.as_ref().map(|t| &t["description"]), Some(&json!("Says its arguments back.")), "{list}");
    assert!(!listed(&list, "tools").contains(&"up__echo".to_owned()), "{list}");
    assert!(search(url, "", None).contains(&"up/say".to_owned()));

    // fakemcp's echo answers with its arguments: only the upstream's own name reaches it.
    let args = json!({"n": 7});
    assert_eq!(Modern::tools_call("up__say", args.clone()).send(url).structured(), &args);
    assert_eq!(Modern::mcpx_call("up", "say", args.clone()).send(url).structured(), &args);
    let script = exec("return await tools.up.say({ n: 7 });").send(url);
    assert_eq!(script.structured()["n"], 7, "{script}");

    // The old name is gone: it fails as a name that never existed.
    let old = Modern::mcpx_call("up", "echo", json!({})).send(url);
    let missing = Modern::mcpx_call("up", "nosuch", json!({})).send(url);
    assert_eq!(error_without(&old, "echo"), error_without(&missing, "nosuch"));
    let old = Modern::tools_call("up__echo", json!({})).send(url);
    let missing = Modern::tools_call("up__nosuch", json!({})).send(url);
    assert_eq!(error_without(&old, "echo"), error_without(&missing, "nosuch"));
}

#[test]
fn a_rename_onto_a_name_the_server_has_is_refused_naming_the_setting() {
    let mut up = fakemcp("global", &tag(), &[]);
    up["tools"] = json!({"rename": {"echo": "whoami"}});
    let mut cfg = config(&[("up", up)]);
    cfg["expose"] = json!(["up"]);
    let daemon = Daemon::start(&cfg);
    let list = Modern::tools_list().send(daemon.url());
    let message = list.error()["message"].as_str().unwrap_or_default();
    assert!(message.contains("mcpServers.up.tools.rename"), "{list}");
}

#[test]
fn a_client_restricted_to_one_server_sees_and_calls_nothing_of_another() {
    let t = tag();
    let mut cfg = config(&[("a", fakemcp("global", &t, &[])), ("b", fakemcp("global", &t, &[]))]);
    cfg["expose"] = json!(["a", "b"]);
    cfg["http"] = json!({"tokens": {"ci": CI_TOKEN, "admin": ADMIN_TOKEN}});
    cfg["clients"] = json!({"token:ci": {"servers": ["a"], "tools": {"deny": ["a/env"]}}});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let as_ci = |request: Modern| request.header("Authorization", &format!("Bearer {CI_TOKEN}")).send(url);
    let as_admin = |request: Modern| request.header("Authorization", &format!("Bearer {ADMIN_TOKEN}")).send(url);

    let tools = listed(&as_ci(Modern::tools_list()), "tools");
    assert!(tools.contains(&"a__whoami".to_owned()), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("b__") || t == "a__env"), "{tools:?}");
    let searched = search(url, "", Some(CI_TOKEN));
    assert!(!searched.iter().any(|t| t.starts_with("b/") || t == "a/env"), "{searched:?}");
    let prompts = listed(&as_ci(Modern::new("prompts/list", json!({}))), "prompts");
    assert_eq!(prompts, ["a__meta"]);
    let resources = as_ci(Modern::new("resources/list", json!({})));
    assert!(!resources.to_string().contains("mcpx://b/"), "{resources}");

    // Each way of reaching b fails as for a server that is not there.
    let hidden = as_ci(Modern::mcpx_call("b", "whoami", json!({})));
    let absent = as_ci(Modern::mcpx_call("zz", "whoami", json!({})));
    assert_eq!(hidden.error_code(), -32602, "{hidden}");
    assert_eq!(error_without(&hidden, "\"b\""), error_without(&absent, "\"zz\""));
    assert_eq!(hidden.error()["data"]["servers"], json!(["a"]), "only the servers the client may use:\n{hidden}");
    let hidden = as_ci(Modern::tools_call("b__whoami", json!({})));
    let absent = as_ci(Modern::tools_call("zz__whoami", json!({})));
    assert_eq!(error_without(&hidden, "b__"), error_without(&absent, "zz__"));
    let hidden = as_ci(Modern::new("prompts/get", json!({"name": "b__meta"})));
    let absent = as_ci(Modern::new("prompts/get", json!({"name": "zz__meta"})));
    assert_eq!(error_without(&hidden, "b__"), error_without(&absent, "zz__"));
    let hidden = as_ci(Modern::new("resources/read", json!({"uri": "mcpx://b/fake://meta"})));
    let absent = as_ci(Modern::new("resources/read", json!({"uri": "mcpx://zz/fake://meta"})));
    assert_eq!(error_without(&hidden, "//b/"), error_without(&absent, "//zz/"));
    let denied = as_ci(Modern::mcpx_call("a", "env", json!({"name": "HOME"})));
    let missing = as_ci(Modern::mcpx_call("a", "nosuch", json!({})));
    assert_eq!(error_without(&denied, "\"env\""), error_without(&missing, "\"nosuch\""));

    // Another token holder is not limited by ci's entry.
    Whoami::of(&as_admin(Modern::mcpx_call("b", "whoami", json!({}))));
    let env = as_admin(Modern::tools_call("a__env", json!({"name": "HOME"})));
    assert_eq!(env.structured()["name"], "HOME", "{env}");
}

/// Looking up a URI a server keeps as its own lists only the servers the caller may use: a
/// client restricted to another server starts no instance of this one by reading it, and
/// the read fails as for a URI nothing serves.
#[test]
fn a_restricted_clients_read_by_own_name_starts_nothing_of_a_server_it_may_not_use() {
    let (t, dir) = (tag(), TempDir::new());
    let starts = dir.path().join("b.starts");
    let recorded = ["--record-start", starts.to_str().expect("a UTF-8 temp path")];
    let mut cfg = config(&[("a", fakemcp("global", &t, &[])), ("b", fakemcp("call", &t, &recorded))]);
    cfg["expose"] = json!(["b"]);
    cfg["exposePrefix"] = json!("never");
    cfg["http"] = json!({"tokens": {"ci": CI_TOKEN, "admin": ADMIN_TOKEN}});
    cfg["clients"] = json!({"token:ci": {"servers": ["a"]}});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let read_as = |token: &str, uri: &str| {
        let request = Modern::new("resources/read", json!({ "uri": uri }));
        request.header("Authorization", &format!("Bearer {token}")).send(url)
    };
    let b_started = || std::fs::read_to_string(&starts).unwrap_or_default().lines().count();

    let hidden = read_as(CI_TOKEN, "fake://meta");
    let absent = read_as(CI_TOKEN, "fake://nosuch");
    assert_eq!(error_without(&hidden, "fake://meta"), error_without(&absent, "fake://nosuch"));
    assert_eq!(b_started(), 0, "a client that may not use b started it");
    // The same read by a client that may use b reaches it.
    let read = read_as(ADMIN_TOKEN, "fake://meta");
    assert!(read.result()["contents"].is_array(), "{read}");
    assert_eq!(b_started(), 1);
}

#[test]
fn a_restricted_client_is_never_told_the_name_of_a_server_it_may_not_use() {
    let t = tag();
    let mut cfg = config(&[("visible", fakemcp("global", &t, &[])), ("secretive", fakemcp("global", &t, &[]))]);
    cfg["http"] = json!({"tokens": {"ci": CI_TOKEN, "admin": ADMIN_TOKEN}});
    cfg["clients"] = json!({"token:ci": {"servers": ["visible"]}});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let ci = format!("Bearer {CI_TOKEN}");
    let as_ci = |request: Modern| request.header("Authorization", &ci).send(url);

    // What the gateway says about itself: discover (2026) and initialize (2025-11-25).
    let discovered = as_ci(Modern::discover());
    let instructions = discovered.result()["instructions"].as_str().expect("instructions").to_owned();
    assert!(instructions.contains("visible") && !instructions.contains("secretive"), "{instructions}");
    let session = LegacySession::open_as(url, "2025-11-25", &[("Authorization", &ci)]);
    let instructions = session.initialized["instructions"].as_str().expect("instructions");
    assert!(instructions.contains("visible") && !instructions.contains("secretive"), "{instructions}");
    // Another caller is told of both.
    let admin = Modern::discover().header("Authorization", &format!("Bearer {ADMIN_TOKEN}")).send(url);
    assert!(admin.result()["instructions"].as_str().is_some_and(|i| i.contains("secretive")), "{admin}");

    // A script naming the server fails as for one that does not exist, naming only the other.
    let script = r#"const caught = [];
        for (const name of ["secretive", "zz"]) {
            try { await call(name, "whoami", {}); } catch (e) { caught.push(e.message.split(name).join("<name>")); }
        }
        return { caught };"#;
    let reply = as_ci(exec(script));
    let caught = &reply.structured()["caught"];
    assert_eq!(caught[0], caught[1], "{reply}");
    assert!(caught[0].as_str().is_some_and(|m| m.contains("visible") && !m.contains("secretive")), "{reply}");
}

#[test]
fn past_its_rate_a_client_is_refused_at_once_naming_the_setting_and_later_served_again() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["limits"] = json!({"rate": {"perSecond": 2, "burst": 3}});
    let daemon = Daemon::start(&cfg);
    let call = |session: &str| Modern::mcpx_call("up", "echo", json!({})).session(session).send(daemon.url());

    // However fast the refill, a burst of calls finds the bucket empty within a few.
    let refused = (0..20).map(|_| call("a")).find(|reply| reply.frame().get("error").is_some());
    let refused = refused.expect("20 calls in a row were never refused");
    let error = refused.assert_error(200, -32603);
    assert_eq!(error["data"]["setting"], "limits.rate", "{refused}");
    assert_eq!((error["data"]["perSecond"].as_f64(), error["data"]["burst"].as_u64()), (Some(2.0), Some(3)));
    assert!(error["message"].as_str().unwrap().contains("limits.rate"), "{refused}");
    // Another client has its own bucket.
    assert!(call("b").frame().get("result").is_some());
    // The bucket refills: the client is served again.
    let served = poll(Duration::from_secs(10), || call("a").frame().get("result").is_some().then_some(()));
    assert!(served.is_some(), "the client was never served again");
}

#[test]
fn a_policy_change_applies_to_the_next_request() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    assert!(search(url, "", None).contains(&"up/echo".to_owned()));

    cfg["mcpServers"]["up"]["tools"] = json!({"deny": ["echo"]});
    cfg["clients"] = json!({"local": {"limits": {"rate": {"perSecond": 0.01, "burst": 1}}}});
    assert!(daemon.rewrite_config(&cfg), "the daemon did not reload its config");
    assert!(!search(url, "", None).contains(&"up/echo".to_owned()));
    let refused = search_reply(url);
    assert_eq!(refused.assert_error(200, -32603)["data"]["setting"], "clients.local.limits.rate", "{refused}");

    cfg["clients"] = json!({});
    cfg["mcpServers"]["up"]["tools"] = json!({});
    assert!(daemon.rewrite_config(&cfg), "the daemon did not reload its config");
    assert!(search(url, "", None).contains(&"up/echo".to_owned()));
}

fn search_reply(url: &str) -> Reply {
    Modern::tools_call("mcpx_search", json!({ "query": "" })).send(url)
}
