//! Where things are: the built binaries, the repository, the protocol schemas.
//!
//! The tests never build anything themselves: `cargo build -p mcpx -p fakemcp` must have
//! run first (a missing binary fails with that command in the message). Everything is
//! found from this package's manifest directory, so the tests work from any cwd.

use std::path::{Path, PathBuf};

/// The repository root (the workspace holding `crates/` and `tests/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the repository root exists")
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the repository root when
/// relative), else `<repo>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => repo_root().join(dir),
        None => repo_root().join("target"),
    }
}

fn debug_binary(name: &str) -> PathBuf {
    let path = target_dir().join("debug").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p mcpx -p fakemcp` before `cargo test -p mcpx-e2e`",
        path.display()
    );
    path
}

/// The `mcpx` binary under test.
pub fn mcpx() -> PathBuf {
    debug_binary("mcpx")
}

/// The `fakemcp` test upstream.
pub fn fakemcp() -> PathBuf {
    debug_binary("fakemcp")
}

/// The official protocol schemas: `$MCPX_SPEC_DIR` when set, else the repository's copy
/// (`spec/schema`, see `spec/README.md`).
pub fn spec_schema_dir() -> PathBuf {
    match std::env::var_os("MCPX_SPEC_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("spec/schema"),
    }
}

/// `.deps`, installed (or verified) once per test run by `scripts/deps.sh`; panics with the
/// script's output when that fails.
pub fn deps() -> PathBuf {
    static DEPS: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let outcome = DEPS.get_or_init(|| {
        let root = repo_root();
        let script = root.join("scripts/deps.sh");
        let output = std::process::Command::new("bash")
            .arg(&script)
            .current_dir(&root)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !output.status.success() {
            return Err(format!(
                "{} failed ({}):\n{}{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(root.join(".deps"))
    });
    outcome.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// The literal paths passed to `.route(` in the front-end crate's source: what the
/// daemon's router is built from, read without knowing how it is built (so a route added
/// later is found by the tests that walk every route).
pub fn routed_paths() -> std::collections::BTreeSet<String> {
    let mut found = std::collections::BTreeSet::new();
    let mut dirs = vec![repo_root().join("crates/server/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for piece in text.split(".route(").skip(1) {
                if let Some(literal) = piece.trim_start().strip_prefix('"').and_then(|p| p.split('"').next()) {
                    found.insert(literal.to_owned());
                }
            }
        }
    }
    found
}
