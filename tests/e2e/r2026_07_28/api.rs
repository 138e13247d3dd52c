//! The `/v1` API and its description, `docs/api/openapi.json`: what is documented is
//! served (with a documented status), and what is served is documented.

use std::collections::BTreeSet;

use mcpx_e2e::socket::{self, stdio_upgrade};
use mcpx_e2e::{Daemon, config, fakemcp, paths, tag, wait_for_exit};
use serde_json::{Value, json};

const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

fn openapi() -> Value {
    let path = paths::repo_root().join("docs/api/openapi.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every (path, method) the description documents, methods lowercased.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    doc["paths"]
        .as_object()
        .expect("openapi.json has paths")
        .iter()
        .flat_map(|(path, item)| {
            METHODS.iter().filter(|m| item.get(**m).is_some()).map(move |m| (path.clone(), (*m).to_owned()))
        })
        .collect()
}

#[test]
fn every_documented_v1_route_is_served_with_a_documented_status() {
    let tag = tag();
    let mut daemon = Daemon::start(&config(&[("alpha", fakemcp("global", &tag, &[]))]));
    let home = daemon.home();
    let doc = openapi();
    let routes = documented(&doc);
    assert!(
        routes.contains(&("/v1/status".into(), "get".into())),
        "the description documents no GET /v1/status: {routes:?}"
    );
    // Deletes after the reads of what they delete; stop last: it ends the daemon.
    let mut ordered: Vec<&(String, String)> = routes.iter().collect();
    ordered.sort_by_key(|(path, method)| (path == "/v1/stop" && method == "post", method == "delete", path.clone()));
    // A path with an `{id}` is tried with one that exists: an artifact of this caller's session.
    let kept = home.v1("POST", "/v1/exec", Some(&json!({"script": "return await artifact('a.txt', 'kept')"})));
    let uri = kept.json()["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let id = uri.strip_prefix("mcpx://artifacts/").unwrap_or_else(|| panic!("no artifact made: {uri:?}")).to_owned();
    // A task's `{id}`: a task of this caller's.
    let slow = json!({"server": "alpha", "tool": "slow", "arguments": {"ms": 600_000}});
    let task = home.v1("POST", "/v1/tasks", Some(&slow));
    let task_id = task.json()["taskId"].as_str().unwrap_or_else(|| panic!("no task made: {task}")).to_owned();

    for (documented_path, method) in ordered {
        let id = if documented_path.starts_with("/v1/tasks/") { &task_id } else { &id };
        let concrete = documented_path.replace("{id}", id);
        let path = &concrete;
        let status = match (path.as_str(), method.as_str()) {
            ("/v1/stdio", "get") => stdio_upgrade(&home.socket(), Some(std::process::id()), None).status,
            ("/v1/call", "post") => {
                let body = json!({"server": "alpha", "tool": "whoami", "arguments": {}});
                home.v1("POST", path, Some(&body)).status
            }
            (_, "post") => home.v1("POST", path, Some(&json!({}))).status,
            (_, method) => home.v1(&method.to_ascii_uppercase(), path, None).status,
        };
        assert!(
            status != 404 && status != 405,
            "{} {path} is documented but the daemon answers {status}",
            method.to_ascii_uppercase()
        );
        let responses = &doc["paths"][documented_path][method]["responses"];
        assert!(
            responses.get(status.to_string()).is_some() || responses.get("default").is_some(),
            "{} {path} answered {status}, which the description does not list: {responses}",
            method.to_ascii_uppercase()
        );
    }
    assert!(
        wait_for_exit(daemon.pid(), std::time::Duration::from_secs(20)),
        "POST /v1/stop answered but the daemon did not stop"
    );
    let _ = daemon.stop();
}

#[test]
fn every_v1_route_the_daemon_serves_is_documented() {
    let daemon = Daemon::start(&config(&[("alpha", fakemcp("global", &tag(), &[]))]));
    let socket_path = daemon.home().socket();
    let doc = openapi();
    let routes = documented(&doc);
    let documented_paths: BTreeSet<&str> = routes.iter().map(|(p, _)| p.as_str()).collect();

    let routed: BTreeSet<String> = paths::routed_paths().into_iter().filter(|p| p.starts_with("/v1")).collect();
    assert!(
        routed.contains("/v1/status"),
        "reading the router's paths from crates/server/src found no /v1/status: {routed:?}"
    );
    for path in &routed {
        assert!(
            documented_paths.contains(path.as_str()),
            "the daemon routes {path}, which docs/api/openapi.json does not document"
        );
    }

    // Probe the routed paths and others a daemon might plausibly serve, with every method:
    // anything answered other than 404/405 must be documented as that method.
    let plausible = [
        "/v1",
        "/v1/",
        "/v1/status",
        "/v1/tools",
        "/v1/call",
        "/v1/stop",
        "/v1/stdio",
        "/v1/search",
        "/v1/ls",
        "/v1/servers",
        "/v1/instances",
        "/v1/sessions",
        "/v1/config",
        "/v1/reload",
        "/v1/restart",
        "/v1/health",
        "/v1/healthz",
        "/v1/version",
        "/v1/logs",
        "/v1/metrics",
        "/v1/resources",
        "/v1/prompts",
        "/v1/exec",
        "/v1/ask",
        "/v1/artifacts",
        "/v1/openapi.json",
        "/v1/tools/call",
        "/v1/status/instances",
        "/v1/stdio/",
    ];
    let probes: BTreeSet<String> = plausible.iter().map(|p| (*p).to_owned()).chain(routed).collect();
    let mut undocumented = Vec::new();
    for path in &probes {
        for method in METHODS {
            if routes.contains(&(path.clone(), method.to_owned())) {
                continue; // checked by the other test (and POST /v1/stop would end this one)
            }
            let upper = method.to_ascii_uppercase();
            let body = (method != "get").then_some(b"{}".as_slice());
            let headers = [("Content-Type", "application/json".to_owned())];
            let reply = socket::request(&socket_path, &upper, path, &headers, body);
            if reply.status != 404 && reply.status != 405 {
                undocumented.push(format!("{upper} {path} → {}", reply.status));
            }
        }
    }
    assert!(undocumented.is_empty(), "served but not documented in docs/api/openapi.json: {undocumented:?}");
    assert!(mcpx_e2e::alive(daemon.pid()), "probing undocumented routes stopped the daemon");
}
