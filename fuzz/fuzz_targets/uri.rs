//! `mcpx://` URI and prefixed-name mapping: any original URI or name round-trips through
//! its public form, a public form never names a server the config does not have, and
//! template matching (caller URI against an upstream's template) terminates quickly.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcpx_gateway::Config;
use mcpx_gateway::naming;

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let text = r#"{"mcpServers": {"docs": {"command": "x"}, "a.b-c_d": {"url": "http://h/mcp"}, "own": {"command": "x"}},
                      "expose": ["own"], "exposePrefix": "conditional"}"#;
        Config::parse(text, Path::new("fuzz.json")).expect("the fuzz config parses")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let config = config();
    // The text as a public URI and a public name a caller sends.
    if let Some((server, uri)) = naming::split_uri(config, text) {
        assert!(config.server(&server).is_some());
        assert!(!naming::keeps_own_names(config, &server));
        assert_eq!(naming::public_uri(config, &server, &uri), text);
    }
    if let Some((server, name)) = naming::split_name(config, text) {
        assert!(config.server(&server).is_some());
        assert_eq!(naming::public_name(config, &server, &name), text);
    }
    // The text as an upstream's original URI and name.
    for server in ["docs", "a.b-c_d"] {
        let public = naming::public_uri(config, server, text);
        assert_eq!(naming::split_uri(config, &public), Some((server.to_owned(), text.to_owned())));
        let public = naming::public_name(config, server, text);
        assert_eq!(naming::split_name(config, &public), Some((server.to_owned(), text.to_owned())));
    }
    assert_eq!(naming::public_uri(config, "own", text), text);
    // Template against URI: the part before the first newline is the template.
    if let Some((template, uri)) = text.split_once('\n') {
        let matched = naming::matches_template(template, uri);
        if template.matches('{').count() <= 3 && uri.len() <= 64 {
            assert_eq!(matched, by_search(template, uri), "{template:?} against {uri:?}");
        }
    }
});

/// The plain definition, trying every split: exponential, so only for short inputs.
fn by_search(t: &str, u: &str) -> bool {
    match t.find('{') {
        None => t == u,
        Some(open) => {
            let Some(close) = t[open..].find('}').map(|c| open + c) else { return t == u };
            if !u.starts_with(&t[..open]) {
                return false;
            }
            let (rest_t, rest_u) = (&t[close + 1..], &u[open..]);
            let reserved = t[open + 1..close].starts_with('+');
            (1..=rest_u.len())
                .filter(|&n| rest_u.is_char_boundary(n))
                .take_while(|&n| reserved || !rest_u[..n].contains('/'))
                .any(|n| by_search(rest_t, &rest_u[n..]))
        }
    }
}
