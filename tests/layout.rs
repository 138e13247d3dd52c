//! The code's layout holds: the crates depend on each other in one direction only, and
//! inside each crate no module imports one that imports it back. A reader can then take
//! the modules (and the crates) in order, each needing only those before it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The crates of the request path, from the wire model to the binary.
const ORDER: [&str; 8] = ["protocol", "http", "oauth", "upstream", "exec", "gateway", "server", "cli"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_owned()
}

#[test]
fn each_crate_depends_only_on_the_crates_before_it() {
    for (i, name) in ORDER.iter().enumerate() {
        let manifest = fs::read_to_string(root().join("crates").join(name).join("Cargo.toml")).unwrap();
        for (j, other) in ORDER.iter().enumerate() {
            let depends = manifest.lines().any(|l| l.trim_start().starts_with(&format!("mcpx-{other}")));
            assert!(!depends || j < i, "crate {name} depends on {other}, which comes after it");
        }
    }
}

#[test]
fn no_module_of_a_crate_imports_one_that_imports_it_back() {
    for name in ORDER {
        let src = root().join("crates").join(name).join("src");
        let graph = module_graph(&src);
        assert!(!graph.is_empty(), "no modules read in {}", src.display());
        if let Some(cycle) = find_cycle(&graph) {
            panic!("crate {name}: modules import each other in a circle: {}", cycle.join(" -> "));
        }
    }
}

/// Each top-level module of the crate → the top-level modules its non-test code names
/// through `crate::`. The crate root (`lib.rs`, or `main.rs` for the binary) declares the
/// modules and is left out.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let root = fs::read_to_string(src.join("lib.rs")).or_else(|_| fs::read_to_string(src.join("main.rs"))).unwrap();
    let modules: BTreeSet<String> = root
        .lines()
        .filter_map(|l| l.trim().trim_start_matches("pub ").trim_start_matches("pub(crate) ").strip_prefix("mod "))
        .map(|m| m.trim_end_matches(';').to_owned())
        .collect();
    let mut graph = BTreeMap::new();
    for module in &modules {
        let mut uses = BTreeSet::new();
        for file in files_of(src, module) {
            let text = fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
            for named in crate_paths(code) {
                if modules.contains(&named) && &named != module {
                    uses.insert(named);
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// `src/<module>.rs` and everything under `src/<module>/`.
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [src.join(format!("{module}.rs"))].into_iter().filter(|f| f.exists()).collect();
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The first segment of every `crate::` path: `crate::a::b` and `crate::{a, b::c}` name
/// `a` (and `b`).
fn crate_paths(code: &str) -> Vec<String> {
    let mut named = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            named.extend(group.split(',').map(|p| first_segment(p.trim())));
        } else {
            named.push(first_segment(rest));
        }
    }
    named
}

fn first_segment(path: &str) -> String {
    path.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_check_sees_a_circle_when_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]
    .into();
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    assert_eq!(crate_paths("use crate::{x, y::Z};\nlet _ = crate::w::f();"), ["x", "y", "w"]);
}
