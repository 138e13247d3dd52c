//! `repo` and `worktree` scopes for stdio clients, with real git repositories and a real
//! `git worktree`: the daemon finds `.git` from the caller's cwd (which it reads from the
//! kernel for the serve process), never from a `GIT_DIR` in its own environment.

use std::path::Path;

use mcpx_e2e::git::{add_worktree, common_dir, init_repo, top_level};
use mcpx_e2e::process::TempDir;
use mcpx_e2e::{Daemon, config, fakemcp, tag};
use serde_json::Value;

/// `git` (repo-scoped), `tree` (worktree-scoped) and `dir` (cwd-scoped) fakemcps.
fn git_config(tag: &str) -> Value {
    config(&[
        ("git", fakemcp("repo", tag, &[])),
        ("tree", fakemcp("worktree", tag, &[])),
        ("dir", fakemcp("cwd", tag, &[])),
    ])
}

fn key(prefix: &str, path: &Path) -> String {
    format!("{prefix}:{}", path.display())
}

#[test]
fn two_serve_processes_in_two_repositories_reach_two_repo_instances() {
    let tag = tag();
    let repos = TempDir::new();
    let a = init_repo(&repos.path().join("a"), &[]);
    let b = init_repo(&repos.path().join("b"), &[]);
    let daemon = Daemon::start(&git_config(&tag));
    let home = daemon.home();
    let mut in_a = home.serve().cwd(&a).start();
    let mut in_b = home.serve().cwd(&b).start();

    let git_a = in_a.whoami("git");
    let git_b = in_b.whoami("git");
    assert_ne!(git_a.instance, git_b.instance, "two repositories shared a repo-scoped instance");
    assert_eq!(in_a.whoami("git").instance, git_a.instance);
    assert_eq!(git_a.cwd.as_deref(), a.to_str(), "a repo-scoped stdio server starts in the caller's cwd");
    assert_eq!(git_b.cwd.as_deref(), b.to_str());

    let mut expected = vec![key("repo", &common_dir(&a)), key("repo", &common_dir(&b))];
    expected.sort();
    assert_eq!(home.instance_keys("git"), expected);
}

#[test]
fn two_serve_processes_in_one_repository_share_its_repo_and_worktree_instances() {
    let tag = tag();
    let repos = TempDir::new();
    let repo = init_repo(&repos.path().join("r"), &["src", "docs/deep"]);
    let daemon = Daemon::start(&git_config(&tag));
    let home = daemon.home();
    let mut in_src = home.serve().cwd(&repo.join("src")).start();
    let mut in_docs = home.serve().cwd(&repo.join("docs/deep")).start();

    let git_src = in_src.whoami("git");
    let git_docs = in_docs.whoami("git");
    assert_eq!(
        git_src.instance, git_docs.instance,
        "two directories of one repository must share its repo-scoped instance"
    );
    assert_eq!(git_docs.calls, 2);
    assert_eq!(
        in_src.whoami("tree").instance,
        in_docs.whoami("tree").instance,
        "two directories of one worktree must share its worktree-scoped instance"
    );
    assert_ne!(
        in_src.whoami("dir").instance,
        in_docs.whoami("dir").instance,
        "cwd scope tells the two directories apart"
    );
    assert_eq!(home.instance_keys("git"), [key("repo", &common_dir(&repo))]);
    assert_eq!(home.instance_keys("tree"), [key("worktree", &top_level(&repo))]);
}

#[test]
fn a_linked_worktree_shares_the_repo_instance_and_gets_its_own_worktree_instance() {
    let tag = tag();
    let repos = TempDir::new();
    let main = init_repo(&repos.path().join("main"), &["src"]);
    let linked = add_worktree(&main, &repos.path().join("linked"), "feature");
    assert!(linked.join(".git").is_file(), "git worktree add makes .git a file in the linked worktree");
    let daemon = Daemon::start(&git_config(&tag));
    let home = daemon.home();
    let mut in_main = home.serve().cwd(&main.join("src")).start();
    let mut in_linked = home.serve().cwd(&linked).start();

    assert_eq!(
        in_main.whoami("git").instance,
        in_linked.whoami("git").instance,
        "a linked worktree belongs to the same repository"
    );
    let tree_main = in_main.whoami("tree");
    let tree_linked = in_linked.whoami("tree");
    assert_ne!(tree_main.instance, tree_linked.instance, "each worktree gets its own worktree-scoped instance");
    assert_eq!(tree_linked.cwd.as_deref(), linked.to_str());

    assert_eq!(common_dir(&main), common_dir(&linked), "git agrees");
    assert_eq!(home.instance_keys("git"), [key("repo", &common_dir(&main))]);
    let mut trees = vec![key("worktree", &main), key("worktree", &linked)];
    trees.sort();
    assert_eq!(home.instance_keys("tree"), trees);
}

/// A daemon started from inside some other repository (or by a git hook, with `GIT_DIR`
/// set) must still key instances by each caller's own repository.
#[test]
fn the_daemons_own_git_dir_does_not_decide_a_callers_repository() {
    let repos = TempDir::new();
    let a = init_repo(&repos.path().join("a"), &[]);
    let b = init_repo(&repos.path().join("b"), &[]);
    let other = init_repo(&repos.path().join("other"), &[]);
    let other_git = other.join(".git");
    let nonexistent = repos.path().join("nonexistent/.git");
    for git_dir in [&other_git, &nonexistent] {
        let tag = tag();
        let git_dir = git_dir.to_str().unwrap();
        let daemon = Daemon::start_with_env(
            &git_config(&tag),
            &[("GIT_DIR", git_dir), ("GIT_WORK_TREE", other.to_str().unwrap())],
        );
        let home = daemon.home();
        let mut in_a = home.serve().cwd(&a).start();
        let mut in_b = home.serve().cwd(&b).start();
        assert_ne!(
            in_a.whoami("git").instance,
            in_b.whoami("git").instance,
            "with GIT_DIR={git_dir} in the daemon's environment, two repositories shared an instance"
        );
        let mut expected = vec![key("repo", &common_dir(&a)), key("repo", &common_dir(&b))];
        expected.sort();
        assert_eq!(home.instance_keys("git"), expected, "with GIT_DIR={git_dir} in the daemon's environment");
        assert_ne!(
            in_a.whoami("tree").instance,
            in_b.whoami("tree").instance,
            "with GIT_DIR={git_dir} in the daemon's environment"
        );
    }
}

/// Outside any repository a repo-scoped server cannot be shared by repository: each call
/// gets its own instance (toward isolation, never toward sharing).
#[test]
fn outside_any_repository_a_repo_scoped_server_serves_each_call_alone() {
    let tag = tag();
    let daemon = Daemon::start(&git_config(&tag));
    let home = daemon.home();
    let plain = TempDir::new();
    assert!(
        plain.path().ancestors().all(|d| !d.join(".git").exists()),
        "the temporary directory must not be inside a repository"
    );
    let mut client = home.serve().cwd(plain.path()).start();
    let first = client.whoami("git");
    let second = client.whoami("git");
    assert_ne!(first.instance, second.instance);
    assert_eq!((first.calls, second.calls), (1, 1));
}
