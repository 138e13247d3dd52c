//! Tool policy and per-client access: which tools, prompts and resources a caller sees,
//! under which names, and how fast a client may send requests.
//!
//! Hidden means absent. Every listing (tools, exposed tools, prompts, resources,
//! templates, `mcpx_search`, a script's `search()`) leaves a hidden item out, and naming
//! one gets exactly the error an unknown one gets, wrapped in [`Error::Hidden`] so that a
//! record of outcomes can tell a refusal from a mistake while the caller cannot. Every
//! pattern and key names the upstream's own names; a rename changes only what callers
//! see, and the upstream always receives its own name.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

use crate::config::{ClientConfig, Config, ItemPolicy, RateConfig};
use crate::error::Error;
use crate::identity::{Identity, Principal};
use crate::{naming, uri};

/// Whether `text` matches `pattern`: `*` stands for any run of characters, `?` for one
/// character, anything else for itself. Linear in the text for each star (one step back
/// to the last star, never a search over every split), as names come from upstreams.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // The last star seen, and where in the text its run would end next.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((star_at, run_end)) = star {
            pi = star_at + 1;
            ti = run_end + 1;
            star = Some((star_at, run_end + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Whether a name passes an allow list (absent: all pass) and a deny list (deny wins).
fn admits(allow: Option<&Vec<String>>, deny: &[String], name: &str) -> bool {
    !deny.iter().any(|g| glob_matches(g, name)) && allow.is_none_or(|a| a.iter().any(|g| glob_matches(g, name)))
}

impl ItemPolicy {
    fn admits(&self, upstream: &str) -> bool {
        admits(self.allow.as_ref(), &self.deny, upstream)
    }

    /// The name callers see for the upstream's `upstream`.
    pub fn shown_name<'a>(&'a self, upstream: &'a str) -> &'a str {
        self.rename.get(upstream).map_or(upstream, String::as_str)
    }

    /// The upstream's name behind a shown one: a rename's target, or a name no rename
    /// took away (a renamed item's own name is not its name any more).
    pub fn upstream_name<'a>(&'a self, shown: &'a str) -> Option<&'a str> {
        match self.rename.iter().find(|(_, to)| *to == shown) {
            Some((from, _)) => Some(from),
            None => (!self.rename.contains_key(shown)).then_some(shown),
        }
    }
}

/// Which of a server's items a policy is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tool,
    Prompt,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
        }
    }
}

/// The `clients` key of a principal: `local`, `token:<name>`, `oauth:<subject>@<issuer>`,
/// `oauth-client:<client_id>@<issuer>`. Each kind has its own prefix, so no name can
/// stand for another kind of caller.
pub fn client_key(principal: &Principal) -> String {
    match principal {
        Principal::Local => "local".to_owned(),
        Principal::Token(name) => format!("token:{name}"),
        Principal::OAuth { issuer, subject } => format!("oauth:{subject}@{issuer}"),
        Principal::OAuthClient { issuer, client } => format!("oauth-client:{client}@{issuer}"),
    }
}

/// Whether `principal` acts on the daemon as a whole (stops it, logs in a credential every
/// caller shares, reads everyone's records and counters): the daemon's owner, and the
/// callers `http.admins` names. Every other caller reaches only what is its own.
pub fn acts_for_daemon(config: &Config, principal: &Principal) -> bool {
    matches!(principal, Principal::Local) || config.http.admins.contains(&client_key(principal))
}

/// What one caller may see and use under one config.
pub struct Access<'a> {
    config: &'a Config,
    client: Option<&'a ClientConfig>,
}

impl<'a> Access<'a> {
    pub fn of(config: &'a Config, identity: &Identity) -> Access<'a> {
        Access::of_principal(config, &identity.principal)
    }

    pub fn of_principal(config: &'a Config, principal: &Principal) -> Access<'a> {
        Access { config, client: config.clients.get(&client_key(principal)) }
    }

    /// Whether the caller may use `server` at all.
    pub fn server(&self, server: &str) -> bool {
        self.config.server(server).is_some()
            && self.client.and_then(|c| c.servers.as_ref()).is_none_or(|servers| servers.iter().any(|s| s == server))
    }

    /// The configured servers the caller may use, in config order.
    pub fn servers(&self) -> Vec<String> {
        self.config.mcp_servers.keys().filter(|s| self.server(s)).cloned().collect()
    }

    fn policy(&self, kind: Kind, server: &str) -> Option<&'a ItemPolicy> {
        let server = self.config.server(server)?;
        Some(match kind {
            Kind::Tool => &server.tools,
            Kind::Prompt => &server.prompts,
        })
    }

    /// Whether the caller may see the server's item of this upstream name.
    pub fn item(&self, kind: Kind, server: &str, upstream: &str) -> bool {
        let Some(policy) = self.policy(kind, server).filter(|_| self.server(server)) else { return false };
        let client = match (kind, self.client) {
            (Kind::Tool, Some(client)) => {
                admits(client.tools.allow.as_ref(), &client.tools.deny, &format!("{server}/{upstream}"))
            }
            _ => true,
        };
        client && policy.admits(upstream)
    }

    /// The upstream's name of the item a caller named `shown` on `server`, when the
    /// caller may see it.
    pub fn named(&self, kind: Kind, server: &str, shown: &str) -> Option<String> {
        let upstream = self.policy(kind, server)?.upstream_name(shown)?;
        self.item(kind, server, upstream).then(|| upstream.to_owned())
    }

    /// Whether the caller may see the server's resource (or template) of this upstream URI:
    /// every reading of its normal form passes (`uri`), and one without a normal form
    /// never does. A deny pattern ignores case, as some file systems do (`/ETC/shadow` is
    /// `/etc/shadow` on macOS and Windows); an allow pattern does not.
    pub fn resource(&self, server: &str, uri: &str) -> bool {
        let Some(config) = self.config.server(server).filter(|_| self.server(server)) else { return false };
        let policy = &config.resources;
        let passes = |reading: &str| {
            let folded = reading.to_lowercase();
            !policy.deny.iter().any(|g| glob_matches(&g.to_lowercase(), &folded))
                && policy.allow.as_ref().is_none_or(|a| a.iter().any(|g| glob_matches(g, reading)))
        };
        uri::normalize(uri).is_ok_and(|u| u.readings().all(passes))
    }

    /// A server's listing as the caller sees it: hidden items left out, the rest under
    /// their shown names and descriptions.
    pub fn show(&self, kind: Kind, server: &str, listed: Vec<Value>) -> Result<Vec<Value>, Error> {
        let tagged = listed.into_iter().map(|item| (server.to_owned(), item)).collect();
        Ok(self.show_all(kind, tagged)?.into_iter().map(|(_, item)| item).collect())
    }

    /// Items of several servers (each tagged with its server) as the caller sees them.
    /// Two items of one server under one name is an error naming the rename, never one
    /// shadowing the other (across servers, `naming::refuse_clashes` decides).
    pub fn show_all(&self, kind: Kind, listed: Vec<(String, Value)>) -> Result<Vec<(String, Value)>, Error> {
        let mut shown = Vec::with_capacity(listed.len());
        let mut names = HashSet::new();
        for (server, mut item) in listed {
            let Some(policy) = self.policy(kind, &server) else { continue };
            let Some(upstream) = item.get("name").and_then(Value::as_str).map(str::to_owned) else { continue };
            if !self.item(kind, &server, &upstream) {
                continue;
            }
            let name = policy.shown_name(&upstream).to_owned();
            if !names.insert((server.clone(), name.clone())) {
                return Err(Error::internal(format!(
                    "server {server:?} offers two {}s named {name:?}: \"mcpServers.{server}.{}.rename\" gives one the other's name; rename that one too, or pick another name",
                    kind.name(),
                    kind.key()
                )));
            }
            if let Some(description) = policy.describe.get(&upstream) {
                item["description"] = description.as_str().into();
            }
            item["name"] = name.into();
            shown.push((server, item));
        }
        Ok(shown)
    }

    /// Whether the policy alone refuses a public name (`<server>__<name>`, or a name of
    /// a server that keeps its own), without asking any server whether it exists: how a
    /// refusal is told from a mistake when both get the unknown-name error.
    pub fn refuses(&self, kind: Kind, public: &str) -> bool {
        if let Some((server, shown)) = naming::split_name(self.config, public) {
            let offered = kind == Kind::Prompt || self.config.expose.contains(&server);
            return offered && self.named(kind, &server, &shown).is_none();
        }
        naming::own_name_servers(self.config).iter().any(|server| {
            self.server(server)
                && self.policy(kind, server).is_some_and(|policy| {
                    policy.upstream_name(public).is_none_or(|upstream| !self.item(kind, server, upstream))
                })
        })
    }

    /// Whether listings depend on who asks (a `clients` entry exists), so no shared
    /// cache may keep them.
    pub fn per_client(&self) -> bool {
        !self.config.clients.is_empty()
    }

    /// The rate that applies to the caller, and the setting that names it: its client's
    /// own, else `limits.rate`.
    pub fn rate(&self, identity: &Identity) -> Option<(String, RateConfig)> {
        match self.client.and_then(|c| c.limits.rate) {
            Some(rate) => Some((format!("clients.{}.limits.rate", client_key(&identity.principal)), rate)),
            None => self.config.limits.rate.map(|rate| ("limits.rate".to_owned(), rate)),
        }
    }
}

/// Token buckets, one per client: each holds up to `burst` requests and refills at
/// `perSecond`. A request finding its bucket empty is refused at once, never delayed.
#[derive(Default)]
pub struct Rates {
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Buckets kept before full ones (the same as no bucket) are dropped.
const KEPT_BUCKETS: usize = 4096;

impl Rates {
    /// Takes one request from `client`'s bucket at `now`; false when it is empty.
    pub fn take(&self, client: &str, rate: RateConfig, now: Instant) -> bool {
        let burst = f64::from(rate.burst);
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= KEPT_BUCKETS && !buckets.contains_key(client) {
            buckets
                .retain(|_, b| b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate.per_second < burst);
        }
        let bucket = buckets.entry(client.to_owned()).or_insert(Bucket { tokens: burst, at: now });
        let refilled = now.saturating_duration_since(bucket.at).as_secs_f64() * rate.per_second;
        bucket.tokens = (bucket.tokens + refilled).min(burst);
        bucket.at = now.max(bucket.at);
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    #[test]
    fn a_star_matches_any_run_and_a_question_mark_one_character() {
        assert!(glob_matches("*", ""));
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("get_*", "get_time"));
        assert!(!glob_matches("get_*", "set_time"));
        assert!(glob_matches("*_time", "get_time"));
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(!glob_matches("a*b*c", "axxbyy"));
        assert!(glob_matches("ech?", "echo"));
        assert!(!glob_matches("ech?", "ech"));
        assert!(glob_matches("h?llo", "hällo"));
        assert!(!glob_matches("echo", "echo2"));
        assert!(glob_matches("up/*", "up/echo"));
        assert!(!glob_matches("up/*", "up2/echo"));
        assert!(glob_matches("[x]", "[x]"), "brackets are themselves");
    }

    #[test]
    fn matching_a_long_name_against_many_stars_is_quick() {
        let name = "a".repeat(50_000);
        assert!(!glob_matches("*a*a*a*a*a*b", &name));
    }

    fn config(text: &str) -> Config {
        Config::parse(text, Path::new("t.json")).unwrap()
    }

    fn principal(p: Principal) -> Identity {
        Identity { principal: p, ..Identity::resolve(None, &[], &Default::default()) }
    }

    #[test]
    fn deny_wins_over_allow_and_no_allow_list_allows_all() {
        let c = config(
            r#"{"mcpServers": {
                "open": {"command": "x"},
                "some": {"command": "x", "tools": {"allow": ["get_*", "echo"], "deny": ["get_secret"]}}
            }}"#,
        );
        let access = Access::of(&c, &principal(Principal::Local));
        assert!(access.item(Kind::Tool, "open", "anything"));
        assert!(access.item(Kind::Tool, "some", "get_time"));
        assert!(access.item(Kind::Tool, "some", "echo"));
        assert!(!access.item(Kind::Tool, "some", "get_secret"));
        assert!(!access.item(Kind::Tool, "some", "whoami"));
        assert!(!access.item(Kind::Tool, "nowhere", "echo"));
    }

    #[test]
    fn a_renamed_item_answers_to_its_new_name_only() {
        let c = config(r#"{"mcpServers": {"s": {"command": "x", "tools": {"rename": {"echo": "say"}}}}}"#);
        let access = Access::of(&c, &principal(Principal::Local));
        assert_eq!(access.named(Kind::Tool, "s", "say").as_deref(), Some("echo"));
        assert_eq!(access.named(Kind::Tool, "s", "echo"), None);
        assert_eq!(access.named(Kind::Tool, "s", "whoami").as_deref(), Some("whoami"));
        let shown = access.show(Kind::Tool, "s", vec![serde_json::json!({"name": "echo"})]).unwrap();
        assert_eq!(shown[0]["name"], "say");
        let clash =
            access.show(Kind::Tool, "s", vec![serde_json::json!({"name": "echo"}), serde_json::json!({"name": "say"})]);
        assert!(clash.unwrap_err().to_string().contains("mcpServers.s.tools.rename"));
    }

    #[test]
    fn two_items_renamed_to_one_name_is_a_config_error() {
        let text = r#"{"mcpServers": {"s": {"command": "x", "tools": {"rename": {"a": "c", "b": "c"}}}}}"#;
        let e = Config::parse(text, Path::new("t.json")).unwrap_err().to_string();
        assert!(e.contains("tools.rename") && e.contains("\"c\""), "{e}");
        let typo = r#"{"mcpServers": {"s": {"command": "x", "tools": {"alow": ["a"]}}}}"#;
        assert!(Config::parse(typo, Path::new("t.json")).unwrap_err().to_string().contains("alow"));
    }

    #[test]
    fn a_client_sees_only_its_servers_and_tools() {
        let c = config(
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}},
                "http": {"tokens": {"ci": "0123456789abcdef0"}},
                "clients": {"token:ci": {"servers": ["a"], "tools": {"deny": ["a/secret*"]}}}}"#,
        );
        let ci = Access::of(&c, &principal(Principal::Token("ci".into())));
        assert_eq!(ci.servers(), ["a"]);
        assert!(ci.item(Kind::Tool, "a", "echo"));
        assert!(!ci.item(Kind::Tool, "a", "secret_x"));
        assert!(!ci.item(Kind::Tool, "b", "echo"));
        assert!(!ci.item(Kind::Prompt, "b", "p"));
        let local = Access::of(&c, &principal(Principal::Local));
        assert_eq!(local.servers(), ["a", "b"]);
        assert!(local.item(Kind::Tool, "a", "secret_x"));
    }

    #[test]
    fn a_name_is_refused_by_policy_only_when_the_policy_alone_hides_it() {
        let c = config(
            r#"{"mcpServers": {
                    "a": {"command": "x", "tools": {"deny": ["secret"], "rename": {"echo": "say"}}},
                    "b": {"command": "x"}},
                "expose": ["a", "b"],
                "http": {"tokens": {"ci": "0123456789abcdef0"}},
                "clients": {"token:ci": {"servers": ["a"]}}}"#,
        );
        let local = Access::of(&c, &principal(Principal::Local));
        assert!(local.refuses(Kind::Tool, "a__secret"));
        assert!(local.refuses(Kind::Tool, "a__echo"), "a renamed tool's own name");
        assert!(!local.refuses(Kind::Tool, "a__say"));
        assert!(!local.refuses(Kind::Tool, "a__typo"), "a mistake is not a refusal");
        assert!(!local.refuses(Kind::Tool, "zz__echo"));
        assert!(!local.refuses(Kind::Tool, "b__echo"));
        let ci = Access::of(&c, &principal(Principal::Token("ci".into())));
        assert!(ci.refuses(Kind::Tool, "b__echo"));
        assert!(ci.refuses(Kind::Prompt, "b__any"));
    }

    #[test]
    fn a_resource_is_matched_in_normal_form_and_a_deny_ignores_case() {
        let c = config(
            r#"{"mcpServers": {
                "fs": {"command": "x", "resources": {"allow": ["file:///pub/*", "https://h/pub/*"], "deny": ["file:///pub/secret*"]}}
            }}"#,
        );
        let access = Access::of(&c, &principal(Principal::Local));
        assert!(access.resource("fs", "file:///pub/a"));
        assert!(access.resource("fs", "FILE://localhost/pub/My%20Documents"));
        assert!(!access.resource("fs", "file:///pub/../etc/shadow"));
        assert!(!access.resource("fs", "file:///pub/%2E%2E/etc/shadow"));
        assert!(!access.resource("fs", "file:///pub/SECRET.txt"), "a deny ignores case");
        assert!(!access.resource("fs", "file:///PUB/a"), "an allow does not");
        assert!(!access.resource("fs", "file:///pub/a%2Fb"), "no normal form, never admitted");
        assert!(access.resource("fs", "https://h/pub//x"));
        assert!(!access.resource("fs", "https://h//pub/x"), "both readings must pass");
    }

    #[test]
    fn a_client_key_must_name_a_caller_the_config_knows() {
        for (clients, what) in [
            (r#"{"token:nobody": {}}"#, "token:nobody"),
            (r#"{"ci": {}}"#, "\"ci\""),
            (r#"{"local": {"servers": ["zz"]}}"#, "zz"),
            (r#"{"local": {"limits": {"rate": {"perSecond": 0, "burst": 1}}}}"#, "perSecond"),
        ] {
            let text = format!(r#"{{"mcpServers": {{"a": {{"command": "x"}}}}, "clients": {clients}}}"#);
            let e = Config::parse(&text, Path::new("t.json")).unwrap_err().to_string();
            assert!(e.contains(what), "{clients}: {e}");
        }
    }

    #[test]
    fn a_bucket_refuses_past_its_burst_and_refills_at_its_rate() {
        let rates = Rates::default();
        let rate = RateConfig { per_second: 2.0, burst: 3 };
        let t0 = Instant::now();
        assert!((0..3).all(|_| rates.take("a", rate, t0)));
        assert!(!rates.take("a", rate, t0));
        assert!(rates.take("b", rate, t0), "another client has its own bucket");
        assert!(!rates.take("a", rate, t0 + Duration::from_millis(400)));
        assert!(rates.take("a", rate, t0 + Duration::from_millis(900)));
        assert!(!rates.take("a", rate, t0 + Duration::from_millis(900)));
        // A long pause refills to the burst, never beyond it.
        let later = t0 + Duration::from_secs(60);
        assert!((0..3).all(|_| rates.take("a", rate, later)));
        assert!(!rates.take("a", rate, later));
    }
}
