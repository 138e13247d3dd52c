//! Real git repositories and worktrees for the `repo` and `worktree` scope tests, made
//! with the `git` program itself (never by writing `.git` by hand), isolated from the
//! user's and the system's git config.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `git <args>` in `dir`; panics with git's output when it fails.
#[track_caller]
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=mcpx e2e",
            "-c",
            "user.email=e2e@mcpx.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_COMMON_DIR")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run git: {e}"));
    assert!(
        output.status.success(),
        "git {} in {} failed ({}):\n{}{}",
        args.join(" "),
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A repository at `dir` (created) with one commit, and the subdirectories `subdirs`.
/// Returns its canonical path.
#[track_caller]
pub fn init_repo(dir: &Path, subdirs: &[&str]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("README"), "e2e\n").expect("write a file to commit");
    for sub in subdirs {
        let sub = dir.join(sub);
        std::fs::create_dir_all(&sub).expect("create a subdirectory");
        std::fs::write(sub.join("file"), "e2e\n").expect("write a file in the subdirectory");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "init"]);
    dir.canonicalize().expect("the repository exists")
}

/// `git worktree add <path> -b <branch>` in `repo`; returns the worktree's canonical path.
#[track_caller]
pub fn add_worktree(repo: &Path, path: &Path, branch: &str) -> PathBuf {
    git(repo, &["worktree", "add", "-q", "-b", branch, path.to_str().expect("a UTF-8 path")]);
    path.canonicalize().expect("the worktree exists")
}

/// What git itself says the repository's common dir is, seen from `dir` (canonical).
#[track_caller]
pub fn common_dir(dir: &Path) -> PathBuf {
    let out = git(dir, &["rev-parse", "--path-format=absolute", "--git-common-dir"]);
    PathBuf::from(out).canonicalize().expect("the common dir exists")
}

/// What git itself says the worktree's top level is, seen from `dir` (canonical).
#[track_caller]
pub fn top_level(dir: &Path) -> PathBuf {
    PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])).canonicalize().expect("the top level exists")
}
