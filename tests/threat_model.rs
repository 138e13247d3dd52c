//! The threat model in `docs/security.md` names, for every promise, the test that holds
//! it. A promise whose test was renamed or removed would be held by nothing while the
//! page still claimed it: every test the page names must exist.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_owned()
}

/// Every Rust source file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push((path.clone(), fs::read_to_string(&path).unwrap()));
        }
    }
    found
}

/// The test paths a code span names: `r2026_07_28::file::test`, `r2026_07_28::file::*`,
/// `mcpx_gateway::module::tests::test`, or a bare `module::tests::test`.
fn named_tests(page: &str) -> Vec<String> {
    page.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.contains("::") && span.chars().all(|c| c.is_ascii_alphanumeric() || "_:*".contains(c)))
        .filter(|span| span.starts_with("r20") || span.contains("::tests::"))
        .map(str::to_owned)
        .collect()
}

/// Whether `text` defines a function `name`; a name ending in `*` is a prefix
/// (`a_batch_*`: every test whose name starts so).
fn defines(text: &str, name: &str) -> bool {
    match name.strip_suffix('*') {
        Some(prefix) => text.contains(&format!("fn {prefix}")),
        None => text.contains(&format!("fn {name}(")),
    }
}

fn holds(test: &str, e2e: &Path, crates: &[(PathBuf, String)]) -> bool {
    let parts: Vec<&str> = test.split("::").collect();
    if parts[0].starts_with("r20") {
        let file = e2e.join(parts[0]).join(format!("{}.rs", parts[1]));
        let Ok(text) = fs::read_to_string(&file) else { return false };
        return parts.get(2).is_none_or(|name| defines(&text, name));
    }
    let name = parts[parts.len() - 1];
    // `mcpx_gateway::…` is in crates/gateway; a bare module path may be in any crate.
    let krate = parts[0].strip_prefix("mcpx_").map(|c| format!("/crates/{c}/"));
    crates.iter().any(|(path, text)| {
        krate.as_ref().is_none_or(|k| path.to_string_lossy().contains(k.as_str())) && defines(text, name)
    })
}

#[test]
fn every_test_the_security_page_names_exists() {
    let page = fs::read_to_string(root().join("docs/security.md")).unwrap();
    let named = named_tests(&page);
    assert!(named.len() > 50, "the page names only {} tests: is the parser reading it?", named.len());
    let e2e = root().join("tests/e2e");
    let crates = sources(&root().join("crates"));
    let missing: Vec<&String> = named.iter().filter(|t| !holds(t, &e2e, &crates)).collect();
    assert!(missing.is_empty(), "docs/security.md names tests that do not exist: {missing:#?}");
}
