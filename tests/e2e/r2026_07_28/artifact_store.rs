//! The artifact store as a caller can reach it: an id on `/v1/artifacts/{id}` names one
//! of the caller's artifacts or nothing, never a file elsewhere (the daemon's own record
//! included), and every byte an artifact keeps counts against the session's quota.

use mcpx_e2e::{Daemon, Modern, config, fakemcp, tag};
use serde_json::json;

#[test]
fn deleting_an_artifact_by_a_path_like_id_deletes_nothing_outside_the_store() {
    let daemon = Daemon::start(&config(&[("alpha", fakemcp("global", &tag(), &[]))]));
    let home = daemon.home();
    let state = home.state_dir();
    let kept =
        home.v1_as("POST", "/v1/exec", Some(&json!({"script": "return await artifact('a.txt', 'kept')"})), "alice");
    assert_eq!(kept.status, 200, "{kept}");
    let record = state.join("daemon.json");
    let bare = state.join("bare");
    std::fs::write(&bare, b"a file with no .json beside it").unwrap();
    let outside = home.root().join("outside");
    std::fs::write(outside.with_extension("json"), b"{}").unwrap();
    std::fs::write(&outside, b"precious").unwrap();
    let absolute = outside.display().to_string().replace('/', "%2F");
    // From the session's folder (<state>/artifacts/<hash>/) two levels up is the state dir.
    for id in ["..%2F..%2Fdaemon", "..%2F..%2Fbare", absolute.as_str(), "%2E%2E", "..%2F..%2F..%2Foutside"] {
        let path = format!("/v1/artifacts/{id}");
        let reply = home.v1_as("DELETE", &path, None, "alice");
        assert_eq!(reply.status, 404, "DELETE {path} answered:\n{reply}");
        let read = home.v1_as("GET", &path, None, "alice");
        assert_eq!(read.status, 404, "GET {path} answered:\n{read}");
    }
    assert!(record.exists(), "the daemon's daemon.json was deleted through an artifact id");
    assert!(bare.exists(), "a file with no record beside it was deleted while the answer said 404");
    assert!(outside.exists() && outside.with_extension("json").exists(), "a file outside the state dir was deleted");
    let status = home.v1("GET", "/v1/status", None);
    assert_eq!(status.status, 200, "the daemon goes on serving:\n{status}");
}

#[test]
fn long_artifact_names_count_against_the_quota() {
    let mut c = config(&[("alpha", fakemcp("global", &tag(), &[]))]);
    c["artifacts"] = json!({ "quotaBytes": 1024 * 1024 });
    // Room for every link in the result: the quota, not exec.maxOutputBytes, is under test.
    c["exec"] = json!({ "maxOutputBytes": 64 * 1024 * 1024 });
    let daemon = Daemon::start(&c);
    // Each artifact keeps one byte of data under a 200 KB name: without counting names,
    // forty of them would keep 8 MB under a 1 MiB quota.
    let script = r#"
        const name = "n".repeat(200 * 1024);
        let kept = 0;
        for (let i = 0; i < 40; i++) {
            try { await artifact(name + i, String(i % 10)); kept++; }
            catch (e) { return { kept, error: e.message }; }
        }
        return { kept };"#;
    let reply = Modern::tools_call("mcpx_exec", json!({ "script": script })).session("alice").send(daemon.url());
    let out = reply.structured();
    // (The reply itself is not printed: it links every kept artifact under its long name.)
    assert!(
        out["kept"].as_u64().is_some_and(|k| k < 6),
        "{} artifacts with 200 KB names fit a 1 MiB quota",
        out["kept"]
    );
    assert!(out["error"].as_str().is_some_and(|e| e.contains("artifacts.quotaBytes")), "{out}");
    let on_disk: u64 = files_under(&daemon.state_dir().join("artifacts"))
        .iter()
        .map(|f| f.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(on_disk <= 1024 * 1024, "{on_disk} bytes on disk under a 1 MiB quota");
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}
