//! How an upstream's names look to callers, and back.
//!
//! Prompts (and the tools of exposed servers) appear as `<server>__<name>`, resources as
//! `mcpx://<server>/<original uri>`: unambiguous, and any original round-trips, since the
//! server part never contains `__` or `/`. The one exception is a server in `expose`
//! whose names are not prefixed (`exposePrefix` `"never"`, or `"conditional"` with one
//! exposed server): its names stay its own and mcpx routes them by the listings it builds.
//!
//! A listed name or title that holds a character which hides itself or reorders the text
//! around it (bidirectional overrides, zero-width characters, controls) is refused: a
//! host would show it as some other name, so such an item is left out of every listing.

use crate::config::{Config, ExposePrefix};
use crate::error::Error;

pub const URI_SCHEME: &str = "mcpx://";

/// Whether `server`'s names reach callers unchanged.
pub fn keeps_own_names(config: &Config, server: &str) -> bool {
    let prefixed = match config.expose_prefix {
        ExposePrefix::Always => true,
        ExposePrefix::Conditional => config.expose.len() > 1,
        ExposePrefix::Never => false,
    };
    !prefixed && config.expose.iter().any(|s| s == server)
}

pub fn public_name(config: &Config, server: &str, name: &str) -> String {
    if keeps_own_names(config, server) { name.to_owned() } else { format!("{server}__{name}") }
}

pub fn public_uri(config: &Config, server: &str, uri: &str) -> String {
    if keeps_own_names(config, server) { uri.to_owned() } else { format!("{URI_SCHEME}{server}/{uri}") }
}

/// The server and original name behind a prefixed public name.
pub fn split_name(config: &Config, public: &str) -> Option<(String, String)> {
    let (server, name) = public.split_once("__")?;
    (config.server(server).is_some() && !keeps_own_names(config, server)).then(|| (server.to_owned(), name.to_owned()))
}

/// The server and original URI behind an `mcpx://` URI.
pub fn split_uri(config: &Config, public: &str) -> Option<(String, String)> {
    let (server, uri) = public.strip_prefix(URI_SCHEME)?.split_once('/')?;
    (config.server(server).is_some() && !keeps_own_names(config, server)).then(|| (server.to_owned(), uri.to_owned()))
}

/// Rewrites the `resource_link` items of a result's content (a tool result's `content`, a
/// prompt's `messages[].content`) to their public URIs, so a caller can follow them through
/// mcpx. Embedded resources are content, not links, and stay as the server wrote them.
pub fn link_resources(config: &Config, server: &str, result: &mut serde_json::Value) {
    use serde_json::Value;
    let rewrite = |item: &mut Value| {
        if item.get("type").and_then(Value::as_str) == Some("resource_link")
            && let Some(uri) = item.get("uri").and_then(Value::as_str)
        {
            item["uri"] = public_uri(config, server, uri).into();
        }
    };
    if let Some(Value::Array(content)) = result.get_mut("content") {
        content.iter_mut().for_each(rewrite);
    }
    if let Some(Value::Array(messages)) = result.get_mut("messages") {
        for message in messages {
            if let Some(content) = message.get_mut("content") {
                match content {
                    Value::Array(items) => items.iter_mut().for_each(rewrite),
                    item => rewrite(item),
                }
            }
        }
    }
}

/// Refuses a listing in which two servers (or a server and mcpx) offer the same public
/// name: with names kept as the servers' own, a clash is never resolved silently.
pub fn refuse_clashes<'a>(kind: &str, entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<(), Error> {
    let mut seen: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for (server, name) in entries {
        if let Some(first) = seen.insert(name, server)
            && first != server
        {
            let servers = [first.to_string(), server.to_string()];
            return Err(Error::Clash { kind: kind.to_owned(), name: name.to_string(), servers });
        }
    }
    Ok(())
}

/// Servers whose names are their own, routed by listing.
pub fn own_name_servers(config: &Config) -> Vec<String> {
    config.expose.iter().filter(|s| keeps_own_names(config, s)).cloned().collect()
}

/// Whether `uri` is an instance of an RFC 6570 template (simple `{var}` expressions; a
/// variable matches one or more characters other than `/`, a reserved `{+var}` anything).
///
/// The URI comes from a caller, so the work is linear in it for each part of the template:
/// the set of positions in `uri` reachable after each part, never a search over every way
/// to split it (which is exponential in the number of variables).
pub fn matches_template(template: &str, uri: &str) -> bool {
    let bytes = uri.as_bytes();
    // reachable[i]: the template parts so far match exactly `uri[..i]`.
    let mut reachable = vec![false; bytes.len() + 1];
    reachable[0] = true;
    let mut rest = template;
    while !rest.is_empty() {
        let (literal, variable, after) = match rest.find('{') {
            Some(open) => match rest[open..].find('}') {
                Some(close) => (&rest[..open], Some(&rest[open + 1..open + close]), &rest[open + close + 1..]),
                None => (rest, None, ""),
            },
            None => (rest, None, ""),
        };
        if !literal.is_empty() {
            let mut next = vec![false; bytes.len() + 1];
            for i in (0..=bytes.len()).filter(|&i| reachable[i]) {
                if bytes[i..].starts_with(literal.as_bytes()) {
                    next[i + literal.len()] = true;
                }
            }
            reachable = next;
        }
        if let Some(variable) = variable {
            let reserved = variable.starts_with('+');
            let mut next = vec![false; bytes.len() + 1];
            // Whether some reachable start lies before `i` with only allowed bytes between.
            let mut open = false;
            for i in 0..bytes.len() {
                open |= reachable[i];
                if !reserved && bytes[i] == b'/' {
                    open = false;
                }
                next[i + 1] = open && uri.is_char_boundary(i + 1);
            }
            reachable = next;
        }
        rest = after;
        if !reachable.contains(&true) {
            return false;
        }
    }
    reachable[bytes.len()]
}

/// Whether `c` hides itself or changes how the text around it reads: C0 and C1 controls,
/// bidirectional embeddings, overrides, isolates and marks, zero-width and other
/// invisible formatting characters, the byte order mark and tag characters.
fn hides_itself(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// Why a listed item may not be shown: the first field among `name` and `title` that
/// holds a character which hides itself, with that character.
pub fn hidden_in(item: &serde_json::Value) -> Option<(&'static str, char)> {
    ["name", "title"].into_iter().find_map(|field| {
        let text = item.get(field)?.as_str()?;
        text.chars().find(|c| hides_itself(*c)).map(|c| (field, c))
    })
}

/// Whether an item of `server`'s listing may be shown to a caller: its name and title
/// hold no character that hides itself. Each refused one is logged, once per server and
/// name.
pub fn shows(kind: &str, server: &str, item: &serde_json::Value) -> bool {
    let Some((field, c)) = hidden_in(item) else { return true };
    let name = item.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
    if first_refusal(server, name) {
        tracing::warn!(
            server,
            "left out {kind} {name:?}: its {field} holds U+{:04X}, a character that hides itself or reorders the text around it, so it could read as another {kind}'s",
            c as u32
        );
    }
    false
}

/// Whether this is the first refusal of `name` from `server` (so it is logged once). The
/// memory is bounded: past it, refusals are no longer logged rather than kept forever.
fn first_refusal(server: &str, name: &str) -> bool {
    const REMEMBERED: usize = 4096;
    static SEEN: std::sync::Mutex<Option<std::collections::HashSet<(String, String)>>> = std::sync::Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let seen = seen.get_or_insert_with(Default::default);
    seen.len() < REMEMBERED && seen.insert((server.to_owned(), name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_titles_with_characters_that_hide_themselves_are_left_out() {
        let refused = [
            "abc\u{202E}fdp",
            "a\u{202A}b",
            "a\u{2066}b",
            "a\u{2069}",
            "zero\u{200B}width",
            "rlm\u{200F}",
            "alm\u{061C}",
            "bom\u{FEFF}",
            "nul\u{0}",
            "esc\u{1B}[31m",
            "c1\u{85}",
            "del\u{7F}",
            "soft\u{AD}hyphen",
            "tag\u{E0041}",
        ];
        for name in refused {
            assert!(!shows("tool", "s", &json!({ "name": name })), "{name:?} was shown");
            assert!(!shows("prompt", "s", &json!({ "name": "ok", "title": name })), "title {name:?} was shown");
        }
        for fine in [
            json!({ "name": "get_time", "title": "Get the time" }),
            json!({ "name": "héllo-世界.v2" }),
            json!({ "name": "عربي" }),
        ] {
            assert!(shows("tool", "s", &fine), "{fine} was left out");
        }
    }

    use std::path::Path;

    fn config(text: &str) -> Config {
        Config::parse(text, Path::new("t.json")).unwrap()
    }

    #[test]
    fn any_uri_round_trips_through_the_mcpx_scheme() {
        let c = config(r#"{"mcpServers": {"docs": {"command": "x"}}}"#);
        for uri in ["test://static", "file:///a/b?c=d#e", "https://h/ü/ä?x=1&y=/z", "x", "mcpx://other/y"] {
            let public = public_uri(&c, "docs", uri);
            assert_eq!(split_uri(&c, &public), Some(("docs".into(), uri.into())), "{uri}");
        }
        assert_eq!(split_uri(&c, "mcpx://nope/x"), None);
    }

    #[test]
    fn exposed_servers_keep_their_names_only_without_a_prefix() {
        let never = config(r#"{"mcpServers": {"a": {"command": "x"}}, "expose": ["a"], "exposePrefix": "never"}"#);
        assert_eq!(public_name(&never, "a", "t"), "t");
        assert_eq!(public_uri(&never, "a", "test://x"), "test://x");
        assert_eq!(split_name(&never, "a__t"), None);
        let always = config(r#"{"mcpServers": {"a": {"command": "x"}}, "expose": ["a"]}"#);
        assert_eq!(public_name(&always, "a", "t__u"), "a__t__u");
        assert_eq!(split_name(&always, "a__t__u"), Some(("a".into(), "t__u".into())));
        let conditional = config(
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}, "expose": ["a"], "exposePrefix": "conditional"}"#,
        );
        assert!(keeps_own_names(&conditional, "a"));
        assert!(!keeps_own_names(&conditional, "b"));
    }

    #[test]
    fn resource_links_in_results_point_through_mcpx_and_embedded_resources_stay() {
        let c = config(r#"{"mcpServers": {"docs": {"command": "x"}}}"#);
        let mut result = serde_json::json!({"content": [
            {"type": "resource_link", "uri": "demo://a", "name": "a"},
            {"type": "resource", "resource": {"uri": "demo://b", "text": "b"}}
        ]});
        link_resources(&c, "docs", &mut result);
        assert_eq!(result["content"][0]["uri"], "mcpx://docs/demo://a");
        assert_eq!(result["content"][1]["resource"]["uri"], "demo://b");
        let mut prompt = serde_json::json!({"messages": [{"role": "user", "content": {"type": "resource_link", "uri": "demo://c", "name": "c"}}]});
        link_resources(&c, "docs", &mut prompt);
        assert_eq!(prompt["messages"][0]["content"]["uri"], "mcpx://docs/demo://c");
    }

    #[test]
    fn a_name_offered_twice_is_refused_naming_both_servers() {
        assert!(refuse_clashes("tool", [("a", "x"), ("b", "y"), ("a", "z")]).is_ok());
        let e = refuse_clashes("tool", [("mcpx", "mcpx_call"), ("a", "x"), ("b", "x")]).unwrap_err();
        assert!(e.to_string().contains("\"a\" and \"b\""), "{e}");
    }

    #[test]
    fn templates_match_their_instances() {
        assert!(matches_template("test://template/{id}/data", "test://template/123/data"));
        assert!(!matches_template("test://template/{id}/data", "test://template/1/2/data"));
        assert!(!matches_template("test://template/{id}/data", "test://template//data"));
        assert!(matches_template("file:///{+path}", "file:///a/b/c"));
        assert!(!matches_template("test://static", "test://other"));
        assert!(!matches_template("x://{a}{b}", "x://é"));
        assert!(matches_template("x://{a}{b}", "x://éa"));
        assert!(matches_template("x://{a", "x://{a"));
    }

    #[test]
    fn matching_a_long_uri_against_many_variables_is_quick() {
        // Found by fuzz/uri: trying every split of the URI for every variable took
        // exponential time, so one caller's long URI could stall a resource read.
        let uri = format!("x://{}y", "a".repeat(20_000));
        assert!(!matches_template("x://{a}{b}{c}{d}{e}{f}z", &uri));
        assert!(matches_template("x://{+a}{+b}{+c}{d}y", &uri));
    }
}
