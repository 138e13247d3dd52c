//! What the journal may keep of text a caller or an upstream chose: long strings cut to a
//! bound (keeping their length and a digest), and, short of `journal.arguments: whole`,
//! every secret-shaped value masked, whether its key, its name/value pair or its own shape
//! gives it away.
//!
//! It must never keep a piece of a secret: a cut drops the word it falls in (when that is
//! no longer than a token), and masking runs before anything is written. It over-masks rather than under-masks: a record is
//! for finding what happened, and a digest-like value masked costs less than a token kept.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// What a masked value reads as.
pub const MASK: &str = "[redacted]";

/// The smallest bound a cut string may have: its prefix, its length and its digest fit.
pub const MIN_BOUND: usize = 64;

/// The words that make a key, a parameter or a variable name a secret's, matched inside the
/// name in any case, its `_`, `-`, `.` and spaces dropped (`API_KEY`, `x-auth-token`).
const SECRET_WORDS: [&str; 16] = [
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "bearer",
    "jwt",
    "key",
    "auth",
    "credential",
    "cookie",
    "session",
    "signature",
    "private",
    "otp",
];

/// Names too short to look for inside others (`compass`, `design`), a secret's when they
/// are the whole name: `pass`, `pw`, `pin`, `sig` (a signed URL's signature).
const SECRET_NAMES: [&str; 4] = ["pass", "pw", "pin", "sig"];

/// Whether `name` names a secret: a token, a password, an API key, a cookie…
pub fn is_secret_name(name: &str) -> bool {
    let name: String = name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    SECRET_WORDS.iter().any(|w| name.contains(w)) || SECRET_NAMES.contains(&name.as_str())
}

/// The longest word [`cut`] drops whole where it falls in the cut: a token's length.
const TOKEN_BYTES: usize = 256;

/// `text` cut to at most `max` bytes: a prefix (without the word the cut fell in, so no
/// part of a token survives), then the whole's length and the start of its SHA-256. Text
/// within `max` is kept as it is; cutting what was cut gives the same text.
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let tail = format!("…[{} bytes, sha256:{}]", text.len(), short_digest(text));
    let mut end = max.saturating_sub(tail.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    // The word the cut fell in goes, if it is short enough to be a token; a longer run of
    // one word (a long name) keeps its prefix.
    let prefix = &text[..end];
    let word =
        prefix.len() - prefix.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || "_-+/=.~%".contains(c)).len();
    let prefix = if word <= TOKEN_BYTES { &prefix[..prefix.len() - word] } else { prefix };
    Cow::Owned(format!("{prefix}{tail}"))
}

/// A script (`mcpx_exec`'s) as the journal keeps it short of `whole`: its length and digest,
/// since whatever it spells out (a token, a password) is not a JSON value to mask.
pub fn script(text: &str) -> String {
    format!("[script: {} bytes, sha256:{}]", text.len(), short_digest(text))
}

/// The first 16 hex digits of `text`'s SHA-256: enough to tell texts apart, too few to be
/// taken for a token when masked.
fn short_digest(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The secret shapes text may hold whatever names it, each with how it is masked.
struct Shape {
    pattern: Regex,
    /// Groups kept around the mask (`$1`, a key or a scheme), or none: all masked.
    keep: &'static str,
    /// Found by the name before the value (`password=…`), not by the value's own shape.
    named: bool,
}

/// The words of [`SECRET_WORDS`] as a pattern inside a name (with its separators), or a
/// name of [`SECRET_NAMES`] alone.
const NAME: &str = r"(?:[A-Za-z0-9_.\-]*(?i:token|secret|passw(?:or)?d|pwd|passphrase|bearer|jwt|key|auth|credential|cookie|session|signature|private|otp)[A-Za-z0-9_.\-]*|\b(?i:pass|pw|pin|sig)\b)";

/// Between a secret's name and its value: `=`, `:` (or either percent-encoded, as in a
/// query nested in another), after the quote that closes a quoted name (`\"` in JSON
/// written inside JSON).
const BETWEEN: &str = r#"\\?["'`]?\s*(?:[=:]|%3[DdAa])\s*"#;

/// A quoted value, whole to its closing quote (words, spaces and all): `"…"`, `\"…\"`,
/// `'…'`, `` `…` ``; one cut before its end is masked to the end of the line.
const QUOTED: &str = r#"\\?"[^"\\\n]*(?:\\?")?|'[^'\n]*'?|`[^`\n]*`?"#;

static SHAPES: LazyLock<Vec<Shape>> = LazyLock::new(|| {
    let shape = |pattern: &str, keep: &'static str| Shape {
        pattern: Regex::new(pattern).expect("a pattern"),
        keep,
        named: false,
    };
    let named = |pattern: &str, keep: &'static str| Shape { named: true, ..shape(pattern, keep) };
    vec![
        // PEM blocks: private keys, certificates; one cut short is masked to its end.
        shape(r"(?s)-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|\z)", ""),
        // URL userinfo: `scheme://user:password@host`, or a token as the user.
        shape(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@?#]*@", "${1}[redacted]@"),
        // An authorization scheme and its credentials.
        shape(r"(?i)\b(bearer|basic|digest|token)(\s+)[A-Za-z0-9._~+/=\-]{6,}", "${1}${2}[redacted]"),
        // JSON Web Tokens (and JWS/JWE): base64url JSON headers start `eyJ`.
        shape(r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]*)*", ""),
        // Tokens whose vendor prefix says what they are.
        shape(
            r"\b(?:(?:sk|pk|rk)[-_][A-Za-z0-9_\-]{12,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|xox[abeoprs]-[A-Za-z0-9\-]{8,}|glpat-[A-Za-z0-9_\-]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{30,}|npm_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,})",
            "",
        ),
        // `name=value`, `name: value`, `"name": "value"`, `name='two words'` where the name
        // is a secret's: query parameters, environment assignments, headers, JSON, YAML or
        // code written as text.
        named(&format!(r#"({NAME})({BETWEEN})(?P<value>{QUOTED}|[^\s&"'`,;<>)\]}}]+)"#), "${1}${2}"),
        // `--name value`, a secret's flag and the word (or quoted words) after it.
        named(&format!(r#"(\s|^)(--?{NAME})(\s+)(?P<value>{QUOTED}|[^\s\-"'`][^\s"',;]*)"#), "${1}${2}${3}"),
        // An `Authorization` header's value is a credential whatever its scheme (`ApiKey`,
        // `SSWS`, `Token`), and a `Cookie` header's every pair: all of it, to the end of its
        // line or quote.
        named(
            &format!(r#"(?i)\b((?:proxy-)?authorization|(?:set-)?cookie)({BETWEEN})(?P<value>{QUOTED}|[^\r\n"'`\\]+)"#),
            "${1}${2}",
        ),
        // `user:password` after a flag that takes one (`curl -u`, `--user`, `--proxy-user`).
        named(r#"(\s|^)(-u|--user|--proxy-user)(\s+|=)(?P<value>[^\s"'`]*:[^\s"'`]*)"#, "${1}${2}${3}"),
    ]
});

/// A run of token characters, long enough to be a credential if it looks random.
static RANDOM: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[A-Za-z0-9_+=\-]{24,}").expect("a pattern"));

/// Whether `word` looks like a random credential rather than a name: upper and lower case
/// letters and digits mixed at more than 3.8 bits of entropy a character, or lower case
/// and a quarter digits at more than 4, or 32 hex digits and more (a long tool name, a
/// UUID, a path have less, or none of these mixes).
fn looks_random(word: &str) -> bool {
    let count = |f: fn(&u8) -> bool| word.bytes().filter(f).count();
    let (upper, lower, digits) =
        (count(u8::is_ascii_uppercase), count(u8::is_ascii_lowercase), count(u8::is_ascii_digit));
    let mut counts = [0u32; 256];
    word.bytes().for_each(|b| counts[usize::from(b)] += 1);
    let n = word.len() as f64;
    let entropy: f64 = counts.iter().filter(|&&c| c > 0).map(|&c| f64::from(c) / n).map(|p| -p * p.log2()).sum();
    let hex =
        word.len() >= 32 && word.bytes().all(|b| b.is_ascii_hexdigit()) && digits >= 4 && digits + 4 <= word.len();
    (upper > 0 && lower > 0 && digits > 0 && entropy > 3.8)
        || (upper == 0 && digits * 4 >= word.len() && lower > 0 && entropy > 4.0)
        || hex
}

/// `text` with every secret-shaped value in it masked.
pub fn text(text: &str) -> Cow<'_, str> {
    masked(text, true)
}

/// A label mcpx wrote (`session:<label>`, `server[scope]`) with every value masked whose
/// own shape is a credential's (a JWT, a bearer, a vendor's token…). Its `kind:` prefixes
/// are not taken for a secret's name, nor a random-looking id (a UUID) for a token: a
/// label names a session, and must still tell sessions apart.
pub fn label(text: &str) -> Cow<'_, str> {
    masked(text, false)
}

fn masked(text: &str, free_text: bool) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for shape in SHAPES.iter().filter(|s| free_text || !s.named) {
        if let Cow::Owned(masked) = shape.pattern.replace_all(&out, |c: &Captures| mask(c, shape.keep)) {
            out = Cow::Owned(masked);
        }
    }
    if free_text && RANDOM.find_iter(&out).any(|m| looks_random(m.as_str())) {
        let masked = RANDOM.replace_all(&out, |c: &Captures| match looks_random(&c[0]) {
            true => MASK.to_owned(),
            false => c[0].to_owned(),
        });
        out = Cow::Owned(masked.into_owned());
    }
    out
}

fn mask(captures: &Captures, keep: &str) -> String {
    if keep.is_empty() {
        return MASK.to_owned();
    }
    let mut out = String::new();
    captures.expand(keep, &mut out);
    // A named value is masked within the quotes it was written in.
    if let Some(value) = captures.name("value") {
        let quote = ["\\\"", "\"", "'", "`"].into_iter().find(|q| value.as_str().starts_with(q)).unwrap_or("");
        out.push_str(&format!("{quote}{MASK}{quote}"));
    }
    out
}

/// The fields that name the value beside them in a name/value pair (`{"name": "API_KEY",
/// "value": …}`, a header, an environment variable, a completion's argument).
const NAMING: [&str; 7] = ["name", "key", "header", "field", "variable", "env", "param"];

/// `value` with every secret-shaped value masked, at any depth: values under a secret's
/// key, the value beside a secret's name in a name/value pair, the argument after a
/// secret's flag in a list, and secret shapes in any string (keys included).
pub fn value(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let named_secret = map.iter().any(|(k, v)| {
                NAMING.contains(&k.to_ascii_lowercase().as_str()) && v.as_str().is_some_and(is_secret_name)
            });
            let entries = map.iter().map(|(k, v)| {
                let names = NAMING.contains(&k.to_ascii_lowercase().as_str());
                let masked = is_secret_name(k) || (named_secret && !names);
                let v = if masked { Value::String(MASK.into()) } else { self::value(v) };
                (text(k).into_owned(), v)
            });
            Value::Object(entries.collect::<Map<String, Value>>())
        }
        Value::Array(items) => {
            let mut after_flag = false;
            let items = items.iter().map(|item| {
                let flag = item.as_str().is_some_and(|s| s.starts_with('-') && is_secret_name(s) && !s.contains('='));
                let masked = after_flag && item.is_string();
                after_flag = flag;
                if masked { Value::String(MASK.into()) } else { self::value(item) }
            });
            Value::Array(items.collect())
        }
        Value::String(s) => Value::String(text(s).into_owned()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJlLXZhbHVlLTEyMw";

    #[test]
    fn secret_shapes_are_masked_in_text_whatever_names_them() {
        let secrets = [
            "Authorization: Bearer abc123DEF456ghi",
            JWT,
            "sk-proj-AbCdEf0123456789xyz",
            "ghp_0123456789abcdefABCDEF0123",
            "xoxb-1234-5678-abcdefgh",
            "AKIAIOSFODNN7EXAMPLE",
            "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----",
            "https://ada:hunter2@example.com/x",
            "https://example.com/x?access_token=hunter2&q=1",
            "export API_KEY=hunter2",
            "mytool --password hunter2",
            "q8Zr2LmN5vX7pK1tY3wB9cD4fG6hJ0sA",
        ];
        for secret in secrets {
            let masked = text(secret);
            assert!(masked.contains(MASK), "{secret:?} → {masked:?}");
            for piece in ["hunter2", "abc123DEF456ghi", "c2lnbmF0dXJl", "AbCdEf0123456789", "0123456789abcdef"] {
                assert!(!masked.contains(piece), "{secret:?} → {masked:?}");
            }
        }
        assert_eq!(
            text("https://example.com/x?access_token=hunter2&q=1"),
            "https://example.com/x?access_token=[redacted]&q=1"
        );
        assert_eq!(text("https://ada:pw@example.com/"), "https://[redacted]@example.com/");
    }

    #[test]
    fn a_named_secret_is_masked_however_it_is_quoted_and_whatever_its_scheme() {
        for (secret, masked) in [
            ("password = 'quoted pw'", "password = '[redacted]'"),
            ("export TOKEN='shell-tok'", "export TOKEN='[redacted]'"),
            ("password: \"correct horse\"", "password: \"[redacted]\""),
            ("{\\\"password\\\": \\\"in json\\\"}", "{\\\"password\\\": \\\"[redacted]\\\"}"),
            ("api_key=`backticked`", "api_key=`[redacted]`"),
            ("mytool --password 'two words'", "mytool --password '[redacted]'"),
            ("curl -H 'Authorization: ApiKey custom-22'", "curl -H 'Authorization: [redacted]'"),
            ("Authorization: SSWS okta-value", "Authorization: [redacted]"),
            ("\"Proxy-Authorization\": \"Negotiate abc def\"", "\"Proxy-Authorization\": \"[redacted]\""),
            ("https://a.example/b?sv=2022&sig=sas%2Bvalue", "https://a.example/b?sv=2022&sig=[redacted]"),
            ("pass=plain-pass", "pass=[redacted]"),
            ("next=%2Fcb%3Fclient_secret%3Dnested-secret", "next=%2Fcb%3Fclient_secret%3D[redacted]"),
            ("Cookie: theme=dark; sid=cookie-pair", "Cookie: [redacted]"),
            ("curl -u ada:curl-pass https://x", "curl -u [redacted] https://x"),
            ("curl --user=ada:curl-pass https://x", "curl --user=[redacted] https://x"),
        ] {
            assert_eq!(text(secret), masked, "{secret:?}");
        }
        let masked = value(&json!({ "pass": "a", "pw": "b", "pin": "c", "sig": "d", "compass": "north" }));
        assert_eq!(masked, json!({ "pass": MASK, "pw": MASK, "pin": MASK, "sig": MASK, "compass": "north" }));
    }

    #[test]
    fn ordinary_text_is_kept() {
        let plain = [
            "echo",
            "up[global]",
            "file:///home/ada/project/src/main.rs",
            "what is the weather in Paris?",
            "github_create_pull_request_v2",
            "list_resources_for_project_2024",
            "mcpx-e2e-1234-5-2960c217",
            "550e8400-e29b-41d4-a716-446655440000",
        ];
        for plain in plain {
            assert_eq!(text(plain), plain);
        }
        assert_eq!(
            label("session:550e8400-e29b-41d4-a716-446655440000"),
            "session:550e8400-e29b-41d4-a716-446655440000"
        );
        assert_eq!(label(&format!("session:{JWT}")), "session:[redacted]");
        assert_eq!(text("commit d0d6be2bbd342be708333a904f0e423e1234abcd"), "commit [redacted]");
    }

    #[test]
    fn a_json_value_keeps_no_secret_under_any_key_pair_flag_or_shape() {
        let arguments = json!({
            "query": "weather",
            "PWD": "hunter2",
            "x-api-key": "hunter2",
            "nested": { "Bearer": "hunter2", "jwt": "hunter2", "list": [{ "Authorization": "Basic hunter2" }] },
            "env": [{ "name": "API_KEY", "value": "hunter2" }, { "name": "HOME", "value": "/home/ada" }],
            "argument": { "name": "password", "value": "hunter2" },
            "argv": ["--token", "hunter2", "--verbose"],
            "note": format!("use {JWT}"),
        });
        let masked = value(&arguments);
        assert!(!masked.to_string().contains("hunter2"), "{masked}");
        assert!(!masked.to_string().contains("c2lnbmF0"), "{masked}");
        assert_eq!(masked["query"], "weather");
        assert_eq!(masked["env"][1], json!({ "name": "HOME", "value": "/home/ada" }));
        assert_eq!(masked["argv"], json!(["--token", MASK, "--verbose"]));
    }

    #[test]
    fn a_long_text_is_cut_to_its_bound_with_its_length_and_digest_and_no_piece_of_its_last_word() {
        let long = format!("{} {}", "word ".repeat(100), "q8Zr2LmN5vX7pK1tY3wB9cD4".repeat(10));
        let kept = cut(&long, 520);
        assert!(kept.len() <= 520, "{}", kept.len());
        assert!(kept.contains(&format!("[{} bytes, sha256:", long.len())), "{kept}");
        assert!(!kept.contains("q8Zr"), "{kept}");
        assert_eq!(cut(&kept, 520), kept, "a cut text is within its bound");
        assert_eq!(cut("short", 520), "short");
        assert!(cut(&"é".repeat(1000), MIN_BOUND).len() <= MIN_BOUND);
    }

    #[test]
    fn a_script_is_kept_as_its_length_and_digest() {
        let source = "const t = 'ghp_0123456789abcdefABCDEF0123'; return t;";
        let kept = script(source);
        assert!(kept.starts_with(&format!("[script: {} bytes, sha256:", source.len())), "{kept}");
        assert!(!kept.contains("ghp_"), "{kept}");
        assert_eq!(text(&kept), kept, "its digest is not taken for a secret");
    }
}
