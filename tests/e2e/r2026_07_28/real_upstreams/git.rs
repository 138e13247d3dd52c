//! The real `mcp-server-git` (Python SDK, stdio) behind mcpx, on a repository the test
//! makes with git itself, called through `mcpx_call` by a 2026-07-28 caller.

use mcpx_e2e::git::git;
use mcpx_e2e::process::TempDir;
use mcpx_e2e::upstreams::{first_text, git_server};
use mcpx_e2e::{Daemon, Modern, config};
use serde_json::json;

#[test]
fn git_log_and_git_status_of_a_real_repository_through_mcpx_call() {
    let dir = TempDir::new();
    let repo = mcpx_e2e::git::init_repo(&dir.path().join("repo"), &[]);
    std::fs::write(repo.join("notes.txt"), "first line\n").unwrap();
    git(&repo, &["add", "notes.txt"]);
    git(&repo, &["commit", "-q", "-m", "Add notes: ünïcode ✓"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let first = git(&repo, &["rev-parse", "HEAD~1"]);

    let daemon = Daemon::start(&config(&[("git", git_server(&repo))]));
    let url = daemon.url();

    let search = Modern::tools_call("mcpx_search", json!({"query": "git"})).send(url);
    let found: Vec<&str> = search.structured()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["server"] == "git")
        .filter_map(|t| t["tool"].as_str())
        .collect();
    for tool in ["git_log", "git_status", "git_diff_unstaged", "git_show"] {
        assert!(found.contains(&tool), "mcpx_search must find {tool}: {found:?}");
    }

    let log = Modern::mcpx_call("git", "git_log", json!({"repo_path": repo})).send(url);
    let text = first_text(log.result());
    assert!(text.contains(&head) && text.contains(&first), "both commits are listed:\n{text}");
    assert!(text.contains("Add notes: ünïcode ✓") && text.contains("init"), "{text}");
    assert!(text.find(&head) < text.find(&first), "newest first, as git log orders them:\n{text}");

    let clean = Modern::mcpx_call("git", "git_status", json!({"repo_path": repo})).send(url);
    assert!(first_text(clean.result()).contains("nothing to commit"), "{clean}");
    std::fs::write(repo.join("notes.txt"), "changed\n").unwrap();
    std::fs::write(repo.join("untracked.rs"), "fn main() {}\n").unwrap();
    let dirty = Modern::mcpx_call("git", "git_status", json!({"repo_path": repo})).send(url);
    let text = first_text(dirty.result());
    assert!(
        text.contains("notes.txt") && text.contains("untracked.rs"),
        "git_status sees the change and the new file:\n{text}"
    );

    // A tool error of the upstream's own comes back as its error, not as mcpx's.
    let outside = dir.path().join("not-a-repo");
    std::fs::create_dir_all(&outside).unwrap();
    let refused = Modern::mcpx_call("git", "git_log", json!({"repo_path": outside})).send(url);
    assert_eq!(refused.result()["isError"], true, "a path outside the repository must fail:\n{refused}");
    let reason = refused.result()["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        reason.contains("outside the allowed repository") && reason.contains("not-a-repo"),
        "the upstream's own reason is relayed:\n{refused}"
    );
}
