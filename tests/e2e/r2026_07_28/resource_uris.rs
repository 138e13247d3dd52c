//! Resource URIs against `resources.deny`: a pattern sees a URI's normal form, so no
//! other spelling of a denied file (case, `localhost`, dot segments, repeated slashes,
//! escapes) reaches the upstream; a spelling the upstream might read two ways is refused
//! with its reason; and what the upstream receives is the normal form that was checked.
//! Every path a URI arrives on is tried: a 2026 request (read, `subscriptions/listen`), a
//! handshake-era session (read, subscribe), a completion's `ref/resource`, and `mcpx serve`
//! (relayed over `/v1/stdio`).

use std::path::Path;
use std::time::Duration;

use mcpx_e2e::process::TempDir;
use mcpx_e2e::{Daemon, LegacySession, Modern, config, fakemcp, poll, tag};
use serde_json::{Value, json};

/// Spellings of files under `/etc`, which `file:///etc/*` denies.
const DENIED: [&str; 15] = [
    "file:///tmp/../etc/shadow",
    "file:////etc/shadow",
    "FILE:///etc/shadow",
    "File:///etc/passwd",
    "file://localhost/etc/shadow",
    "file://LOCALHOST./etc/shadow",
    "file://%6Cocalhost/etc/shadow",
    "file:///%65tc/shadow",
    "file:///./etc/shadow",
    "file:/etc/shadow",
    "file:///%2e%2e/etc/shadow",
    "file:///tmp/x/../../etc/shadow",
    "file:///tmp//../etc/shadow",
    "file:///tmp/%2E%2E/etc/shadow",
    "file:///ETC/shadow",
];

/// Spellings an upstream could read as a file under `/etc` or not, depending on how it
/// decodes them, and a word of the reason each is refused with.
const AMBIGUOUS: [(&str, &str); 8] = [
    ("file:///etc%2Fshadow", "%2F"),
    ("file:///tmp%2F..%2Fetc%2Fshadow", "%2F"),
    ("file:///etc%5Cshadow", "%5C"),
    ("file:///etc\\shadow", "backslash"),
    ("file:///etc/shadow%00.txt", "control character"),
    ("file:///%zzetc/shadow", "hex digits"),
    ("file:///%C0%AE%C0%AE/etc/shadow", "not UTF-8"),
    ("file://evil.example/etc/shadow", "host"),
];

fn public(uri: &str) -> String {
    format!("mcpx://up/{uri}")
}

/// The URIs the upstream received in reads, subscriptions and completions, in order.
fn received(record: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(record).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("one JSON request per line"))
        .filter_map(|request| {
            let params = &request["params"];
            match request["method"].as_str()? {
                "resources/read" | "resources/subscribe" => params["uri"].as_str().map(str::to_owned),
                "completion/complete" => params["ref"]["uri"].as_str().map(str::to_owned),
                _ => None,
            }
        })
        .collect()
}

/// Waits until the upstream has received `uri` (requests on one path arrive in order, so
/// everything sent before it on that path has arrived too, or never will).
#[track_caller]
fn wait_received(record: &Path, uri: &str) {
    let seen = poll(Duration::from_secs(20), || received(record).iter().any(|u| u == uri).then_some(()));
    assert!(seen.is_some(), "the upstream never received {uri:?}; it received {:?}", received(record));
}

#[track_caller]
fn assert_ambiguous_refusal(error: &Value, uri: &str, why: &str) {
    assert_eq!(error["code"], -32602, "{uri}: {error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("is refused") && message.contains(why), "{uri}: {error}");
    assert_eq!(error["data"]["uri"], public(uri), "{uri}: {error}");
}

#[test]
fn no_spelling_of_a_denied_file_reaches_the_upstream_on_any_path() {
    let dir = TempDir::new();
    let record = dir.path().join("requests.jsonl");
    let mut up = fakemcp("global", &tag(), &["--record-requests", record.to_str().unwrap()]);
    up["resources"] = json!({"deny": ["file:///etc/*"]});
    let daemon = Daemon::start(&config(&[("up", up)]));
    let url = daemon.url();

    // A 2026 request, and a completion naming the resource.
    for uri in DENIED {
        let read = Modern::new("resources/read", json!({ "uri": public(uri) })).send(url);
        assert_eq!(read.error_code(), -32602, "{uri}: {read}");
        let completion =
            json!({"ref": {"type": "ref/resource", "uri": public(uri)}, "argument": {"name": "a", "value": ""}});
        let completed = Modern::new("completion/complete", completion).send(url);
        assert!(completed.frame().get("error").is_some(), "{uri}: {completed}");
    }
    for (uri, why) in AMBIGUOUS {
        let read = Modern::new("resources/read", json!({ "uri": public(uri) })).send(url);
        assert_ambiguous_refusal(read.error(), uri, why);
        let filter = json!({"notifications": {"resourceSubscriptions": [public(uri)]}});
        assert_ambiguous_refusal(Modern::new("subscriptions/listen", filter).send(url).error(), uri, why);
        let completion =
            json!({"ref": {"type": "ref/resource", "uri": public(uri)}, "argument": {"name": "a", "value": ""}});
        assert_ambiguous_refusal(Modern::new("completion/complete", completion).send(url).error(), uri, why);
    }
    // What was checked is what is read: an allowed spelling reaches the upstream in its
    // normal form, never as written.
    let allowed = Modern::new("resources/read", json!({ "uri": public("FILE://localhost/tmp/./x/../modern") }));
    allowed.send(url);
    let completion = json!({"ref": {"type": "ref/resource", "uri": public("file:/tmp//completed")}, "argument": {"name": "a", "value": ""}});
    Modern::new("completion/complete", completion).send(url);
    wait_received(&record, "file:///tmp/modern");
    wait_received(&record, "file:///tmp/completed");

    // A handshake-era session: reads and subscriptions.
    let session = LegacySession::open(url);
    for uri in DENIED {
        let read = session.request("resources/read", json!({ "uri": public(uri) }));
        assert_eq!(read.error_code(), -32002, "{uri}: {read}");
        let subscribed = session.request("resources/subscribe", json!({ "uri": public(uri) }));
        assert!(subscribed.frame().get("error").is_some(), "{uri}: {subscribed}");
    }
    for (uri, why) in AMBIGUOUS {
        assert_ambiguous_refusal(session.request("resources/read", json!({ "uri": public(uri) })).error(), uri, why);
        let subscribed = session.request("resources/subscribe", json!({ "uri": public(uri) }));
        assert_ambiguous_refusal(subscribed.error(), uri, why);
    }
    session.request("resources/read", json!({ "uri": public("file://localhost/tmp/%6Cegacy") }));
    wait_received(&record, "file:///tmp/legacy");

    // `mcpx serve`, whose requests reach the daemon over `/v1/stdio`.
    let mut serve = daemon.home().serve().start();
    for uri in DENIED {
        let read = serve.request(&Modern::new("resources/read", json!({ "uri": public(uri) })).frame());
        assert_eq!(read.error()["code"], -32602, "{uri}: {read}");
    }
    for (uri, why) in AMBIGUOUS {
        let read = serve.request(&Modern::new("resources/read", json!({ "uri": public(uri) })).frame());
        assert_ambiguous_refusal(read.error(), uri, why);
    }
    serve.request(&Modern::new("resources/read", json!({ "uri": public("file:///tmp/a/b/../../served") })).frame());
    wait_received(&record, "file:///tmp/served");

    let expected = ["file:///tmp/modern", "file:///tmp/completed", "file:///tmp/legacy", "file:///tmp/served"];
    assert_eq!(received(&record), expected, "only the allowed reads, each in its normal form, reached the upstream");
}

#[test]
fn a_listed_resource_is_found_by_any_spelling_of_its_uri_and_read_by_its_own() {
    let dir = TempDir::new();
    let record = dir.path().join("requests.jsonl");
    let up = fakemcp("global", &tag(), &["--record-requests", record.to_str().unwrap()]);
    let mut cfg = config(&[("up", up)]);
    cfg["expose"] = json!(["up"]);
    cfg["exposePrefix"] = json!("never");
    let daemon = Daemon::start(&cfg);

    // fakemcp lists `fake://meta`; a server that keeps its own names is found by listing.
    let read = Modern::new("resources/read", json!({"uri": "FAKE://Meta."})).send(daemon.url());
    assert!(read.result()["contents"].is_array(), "{read}");
    assert_eq!(read.result()["contents"][0]["uri"], "fake://meta", "{read}");
    wait_received(&record, "fake://meta");
    let ambiguous = Modern::new("resources/read", json!({"uri": "fake://meta/x%2Fy"})).send(daemon.url());
    assert_eq!(ambiguous.error_code(), -32602, "{ambiguous}");
    assert!(ambiguous.error()["message"].as_str().unwrap_or_default().contains("is refused"), "{ambiguous}");
    assert_eq!(received(&record), ["fake://meta"]);
}

/// A file server reads a `file:` URI's path and drops what follows it (`?query`,
/// `#fragment`), and no server ever receives a fragment as part of the name it fetches: a
/// pattern that names the file itself must hold against a URI with either added.
#[test]
fn a_query_or_fragment_does_not_hide_a_denied_resource() {
    let dir = TempDir::new();
    let record = dir.path().join("requests.jsonl");
    let mut up = fakemcp("global", &tag(), &["--record-requests", record.to_str().unwrap()]);
    up["resources"] = json!({"deny": ["file:///etc/shadow", "file:///**.pem", "https://h/admin"]});
    let daemon = Daemon::start(&config(&[("up", up)]));
    let url = daemon.url();
    let denied = [
        "file:///etc/shadow?",
        "file:///etc/shadow?raw=1",
        "file:///etc/shadow#",
        "file:///etc/shadow#top",
        "FILE://localhost/etc/./shadow?x#y",
        "file:///home/u/key.pem?v=2",
        "file:///home/u/key.pem#x",
        "https://h/admin#x",
    ];
    let session = LegacySession::open(url);
    for uri in denied {
        let read = Modern::new("resources/read", json!({ "uri": public(uri) })).send(url);
        assert_eq!(read.error_code(), -32602, "{uri}: {read}");
        let legacy = session.request("resources/read", json!({ "uri": public(uri) }));
        assert!(legacy.frame().get("error").is_some(), "{uri}: {legacy}");
    }
    // A URI the patterns leave alone still reaches the upstream, its query and all.
    Modern::new("resources/read", json!({ "uri": public("file:///tmp/notes?v=2") })).send(url);
    Modern::new("resources/read", json!({ "uri": public("https://h/public?page=2#top") })).send(url);
    wait_received(&record, "file:///tmp/notes?v=2");
    wait_received(&record, "https://h/public?page=2#top");
    assert_eq!(
        received(&record),
        ["file:///tmp/notes?v=2", "https://h/public?page=2#top"],
        "no spelling of a denied resource reached the upstream"
    );
}

/// Spellings of one web resource that a fetching server reads as one: the default port,
/// a port with leading zeros, userinfo (which names no other resource), and the many ways
/// a URL parser writes one IP address (`127.1`, `2130706433`, `0x7f.0.0.1`, octal,
/// IPv6 zeros). A pattern naming the resource must hold against each.
#[test]
fn no_other_spelling_of_a_denied_host_or_port_reaches_the_upstream() {
    let dir = TempDir::new();
    let record = dir.path().join("requests.jsonl");
    let mut up = fakemcp("global", &tag(), &["--record-requests", record.to_str().unwrap()]);
    up["resources"] = json!({"deny": ["https://h/admin*", "http://127.0.0.1/*", "https://[::1]/*"]});
    let daemon = Daemon::start(&config(&[("up", up)]));
    let url = daemon.url();
    let denied = [
        "https://h:443/admin",
        "https://h:0443/admin",
        "https://user@h/admin",
        "https://user:pw@h.:443/admin",
        "http://127.0.0.1:80/x",
        "http://127.0.0.1:080/x",
        "http://127.1/x",
        "http://2130706433/x",
        "http://0x7f.0.0.1/x",
        "http://0177.0.0.1/x",
        "http://0x7F000001/x",
        "https://[0:0:0:0:0:0:0:1]/x",
        "https://[::0001]/x",
    ];
    for uri in denied {
        let read = Modern::new("resources/read", json!({ "uri": public(uri) })).send(url);
        assert_eq!(read.error_code(), -32602, "{uri}: {read}");
    }
    // Not one URI a parser could take two ways: refused, naming why.
    for (uri, why) in [("http://1.2.3.4.5/x", "IPv4"), ("http://0x1g.0.0.1/x", "IPv4"), ("https://h:44x/admin", "port")]
    {
        let read = Modern::new("resources/read", json!({ "uri": public(uri) })).send(url);
        assert_ambiguous_refusal(read.error(), uri, why);
    }
    // Another port is another origin; an allowed URI reaches the upstream in normal form.
    Modern::new("resources/read", json!({ "uri": public("https://H:08443/admin") })).send(url);
    wait_received(&record, "https://h:8443/admin");
    assert_eq!(received(&record), ["https://h:8443/admin"], "no spelling of a denied resource reached the upstream");
}
