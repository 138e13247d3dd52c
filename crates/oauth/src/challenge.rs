//! `WWW-Authenticate` (RFC 9110 §11.6.1, RFC 6750 §3): the `Bearer` challenge's parameters
//! an MCP client acts on — `resource_metadata` (RFC 9728), `scope` and `error`.
//!
//! A header may hold several challenges (`Basic realm="x", Bearer scope="a b"`), and a
//! response several headers; parameters are tokens or quoted strings with `\` escapes, and
//! commas separate both parameters and challenges. Anything unreadable is skipped, never a
//! panic: the header comes from a server mcpx does not trust.

/// The parameters of a `Bearer` challenge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    /// Space-separated in the header; split here, order kept, empties dropped.
    pub scope: Option<Vec<String>>,
    pub error: Option<String>,
}

impl Challenge {
    /// Whether the server says the token lacks a scope (403 step-up).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The first `Bearer` challenge among `headers` (each one `WWW-Authenticate` value), if any.
pub fn bearer<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
    headers
        .into_iter()
        .find_map(|h| parse(h).into_iter().find(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer")))
        .map(|(_, params)| {
            let get = |name: &str| params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
            Challenge {
                resource_metadata: get("resource_metadata"),
                scope: get("scope").map(|s| s.split_ascii_whitespace().map(str::to_owned).collect()),
                error: get("error"),
            }
        })
}

type Params = Vec<(String, String)>;

/// Every challenge in one header value: its scheme and its `name=value` parameters (a
/// `token68` is dropped: Bearer challenges carry none that MCP reads).
pub fn parse(header: &str) -> Vec<(String, Params)> {
    let mut out: Vec<(String, Params)> = Vec::new();
    let mut rest = header;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return out;
        }
        let (word, after) = token(rest);
        if word.is_empty() {
            // Not a token where one must be: skip one character and look again.
            let mut chars = rest.chars();
            chars.next();
            rest = chars.as_str();
            continue;
        }
        let after_ws = after.trim_start_matches([' ', '\t']);
        match after_ws.strip_prefix('=') {
            // `name=value`: a parameter of the current challenge.
            Some(value_text) if !value_text.starts_with('=') && !out.is_empty() => {
                let value_text = value_text.trim_start_matches([' ', '\t']);
                let (value, after_value) = value(value_text);
                if let Some((_, params)) = out.last_mut() {
                    params.push((word.to_owned(), value));
                }
                rest = after_value;
            }
            // A token68 (ends with `=` padding) or a stray parameter: skip to the next comma.
            Some(_) => rest = after_ws.split_once(',').map(|(_, r)| r).unwrap_or(""),
            // A new scheme.
            None => {
                out.push((word.to_owned(), Vec::new()));
                rest = after;
            }
        }
    }
}

/// A token (RFC 9110 `tchar`s) at the start of `text`, and what follows it.
fn token(text: &str) -> (&str, &str) {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/".contains(c))).unwrap_or(text.len());
    text.split_at(end)
}

/// A parameter value: a quoted string (unescaped) or a token; and what follows it.
fn value(text: &str) -> (String, &str) {
    let Some(quoted) = text.strip_prefix('"') else {
        let (word, rest) = token(text);
        return (word.to_owned(), rest);
    };
    let mut out = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            }
            '"' => return (out, &quoted[i + 1..]),
            c => out.push(c),
        }
    }
    // Unterminated: take what there is.
    (out, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_yields_its_resource_metadata_scope_and_error() {
        let c = bearer([r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#]).unwrap();
        assert_eq!(c.resource_metadata.as_deref(), Some("http://localhost:1/.well-known/oauth-protected-resource/mcp"));
        assert_eq!(c.scope, Some(vec!["mcp:basic".to_owned(), "mcp:write".to_owned()]));
        assert!(c.insufficient_scope());
    }

    #[test]
    fn the_bearer_challenge_is_found_among_several_and_across_headers() {
        let c = bearer([r#"Basic realm="x", Bearer realm="y", scope=files"#]).unwrap();
        assert_eq!(c.scope, Some(vec!["files".to_owned()]));
        let c = bearer(["Negotiate abc==", r#"bearer resource_metadata="https://a/b""#]).unwrap();
        assert_eq!(c.resource_metadata.as_deref(), Some("https://a/b"));
        assert_eq!(bearer([r#"Basic realm="only basic""#]), None);
    }

    #[test]
    fn quoted_strings_keep_commas_and_escapes() {
        let c = bearer([r#"Bearer error_description="a, \"quoted\" thing", scope="a,b""#]).unwrap();
        assert_eq!(c.scope, Some(vec!["a,b".to_owned()]));
        let all = parse(r#"Bearer error_description="a, \"quoted\" thing""#);
        assert_eq!(all[0].1[0].1, r#"a, "quoted" thing"#);
    }

    #[test]
    fn garbage_is_skipped_without_panicking() {
        for header in
            ["", ",,,", "=", "Bearer =", "Bearer scope=\"unterminated", "\"", "Bearer a=b=c", "ü Bearer scope=x"]
        {
            let _ = bearer([header]);
        }
        assert_eq!(bearer(["ü Bearer scope=x"]).unwrap().scope, Some(vec!["x".to_owned()]));
    }
}
