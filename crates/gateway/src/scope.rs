//! How a request finds its instance: a server's `scope` plus the caller's identity gives
//! an `InstanceKey`. Only equality of keys matters.
//!
//! A scope that needs something the request does not carry (a cwd over HTTP, a session
//! where none was named) degrades to `call`: one instance per call. Degrading toward
//! isolation costs a process; degrading toward sharing would leak one caller's state into
//! another's. Each (server, scope, reason) is logged once, naming the fix.
//!
//! Listings are the one exception to "a process per call". A caller that carries nothing
//! its scope could key on (no session, cwd or pid: a 2026 request that names no session,
//! a legacy POST outside a session) lists through one kept `lister` instance per server
//! instead of starting a process per `tools/list`, `prompts/list` or `resources/list`,
//! which hosts fan out as they connect. That instance only ever answers listings, whose
//! requests carry nothing of the caller but a cursor the upstream made, so no caller's
//! state reaches it; its tool calls and reads still each get their own instance.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::identity::{Identity, Principal, SessionKey};

/// A server's `scope`: what its instances are keyed on, from the widest to the narrowest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One instance for every caller.
    #[default]
    Global,
    /// One instance per authenticated principal: the local user, each `http.tokens`
    /// holder, each OAuth subject of each issuer. Never degrades: every request has one.
    User,
    /// One per session of one principal.
    Session,
    /// One per caller's working directory, of one principal.
    Cwd,
    /// One per git repository (its shared git directory) the caller works in, of one
    /// principal.
    Repo,
    /// One per git worktree the caller works in, of one principal.
    Worktree,
    /// One per local caller process.
    Pid,
    /// One per call.
    Call,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::User => "user",
            Scope::Session => "session",
            Scope::Cwd => "cwd",
            Scope::Repo => "repo",
            Scope::Worktree => "worktree",
            Scope::Pid => "pid",
            Scope::Call => "call",
        }
    }
}

/// Which instance of which server answers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InstanceKey {
    pub server: String,
    pub owner: Owner,
}

/// Whom an instance serves: what its server's scope keyed it on for the caller.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Owner {
    /// Every caller (`global`).
    Everyone,
    /// Every caller of one principal (`user`).
    User(Principal),
    /// One session of one principal.
    Session(SessionKey),
    /// Callers working in this directory.
    Cwd(Place),
    /// Callers inside the repository of this shared git directory.
    Repo(Place),
    /// Callers inside the worktree with this top level.
    Worktree(Place),
    /// One local process.
    Pid(u32),
    /// One call, by its call id.
    Call(String),
    /// Listings only, for a principal's callers who carry nothing to key on (see
    /// [`Scoper::listing_key`]).
    Lister(Principal),
}

/// A directory an instance is keyed on, whose machine it is on, and whose callers it
/// serves: two principals naming one directory get two instances, as with every other
/// per-caller key (the owner's browser or shell in a project is never a token holder's).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Place {
    #[serde(with = "path_bytes")]
    pub path: PathBuf,
    /// The principal that named it (the local user's own cwd, or roots it or another
    /// principal answered with; see `places` for which directories each may name).
    #[serde(default, skip_serializing_if = "is_local")]
    pub principal: Principal,
    /// In a cluster, the node whose machine the path is on, when a process on that machine
    /// named it (a unix-socket or stdio caller's cwd): the same path on another machine is
    /// another directory, so such a key is never shared across nodes. `None` for a path a
    /// caller named over the network (its roots) and for a daemon outside a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

fn is_local(principal: &Principal) -> bool {
    *principal == Principal::Local
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some(node) => write!(f, "[{node}]{}", self.path.display()),
            None => write!(f, "{}", self.path.display()),
        }
    }
}

/// A path as its bytes: a directory's name need not be UTF-8, and an owner sealed into a
/// `requestState` must come back as the same directory.
mod path_bytes {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(path.as_os_str().as_bytes())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PathBuf, D::Error> {
        Ok(PathBuf::from(OsString::from_vec(Vec::<u8>::deserialize(deserializer)?)))
    }
}

impl Owner {
    /// Whether a listing may show the instance to a caller of `principal`: every instance
    /// to the local user; to a token holder, the instances everyone shares (`global`), its
    /// own lister, its `user` instance and those of its own sessions and places.
    pub fn is_visible_to(&self, principal: &Principal) -> bool {
        match (principal, self) {
            (Principal::Local, _) | (_, Owner::Everyone) => true,
            (principal, Owner::Lister(lister) | Owner::User(lister)) => lister == principal,
            (principal, Owner::Session(key)) => &key.principal == principal,
            (principal, Owner::Cwd(place) | Owner::Repo(place) | Owner::Worktree(place)) => {
                &place.principal == principal
            }
            _ => false,
        }
    }
}

impl Owner {
    /// The directory a caller named over the network (its roots) that this key is for:
    /// callers of the key's principal naming it share the instance. `None` for any other
    /// key.
    pub fn named_place(&self) -> Option<&Place> {
        match self {
            Owner::Cwd(place) | Owner::Repo(place) | Owner::Worktree(place) => place.node.is_none().then_some(place),
            _ => None,
        }
    }
}

impl InstanceKey {
    /// Whether the instance lives only as long as one call.
    pub fn is_per_call(&self) -> bool {
        matches!(self.owner, Owner::Call(_))
    }

    /// Whether the instance is a server's lister, which answers listings only.
    pub fn is_lister(&self) -> bool {
        matches!(self.owner, Owner::Lister(_))
    }

    /// The local process whose instance this is: when it exits, the instance goes.
    pub fn process(&self) -> Option<u32> {
        match &self.owner {
            Owner::Pid(pid) => Some(*pid),
            Owner::Session(key) => key.process(),
            _ => None,
        }
    }
}

impl fmt::Display for InstanceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.server, self.owner)
    }
}

/// `global`, `user` (the local user's; a token holder's `user@"<token name>"`, an OAuth
/// subject's `user@oauth["<issuer>","<subject>"]`), a session's key (see [`SessionKey`]), `cwd:<path>`, `repo:<git common dir>`,
/// `worktree:<top level>` (in a cluster, a local caller's path after its node: `cwd:[<node>]<path>`;
/// a token holder's place after its tag: `cwd@"<token name>":<path>`), `pid:<n>`, `call:<call id>`, or `lister` (a token holder's:
/// `lister@"<token name>"`): how logs, `mcpx status` and the invocation context name it.
impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Everyone => f.write_str("global"),
            Owner::User(principal) => write!(f, "user{}", principal.tag()),
            Owner::Session(key) => key.fmt(f),
            Owner::Cwd(place) => write!(f, "cwd{}:{place}", place.principal.tag()),
            Owner::Repo(place) => write!(f, "repo{}:{place}", place.principal.tag()),
            Owner::Worktree(place) => write!(f, "worktree{}:{place}", place.principal.tag()),
            Owner::Pid(pid) => write!(f, "pid:{pid}"),
            Owner::Call(id) => write!(f, "call:{id}"),
            Owner::Lister(principal) => write!(f, "lister{}", principal.tag()),
        }
    }
}

/// Derives instance keys and remembers which degradations it already logged.
#[derive(Default)]
pub struct Scoper {
    logged: Mutex<HashSet<(String, Scope, &'static str)>>,
    /// This node, in a cluster: named in the keys of directories on this machine.
    node: std::sync::OnceLock<String>,
}

impl Scoper {
    /// From now on, a local caller's directory is keyed as this node's machine's.
    pub fn join_cluster(&self, node: &str) {
        let _ = self.node.set(node.to_owned());
    }

    pub fn key(&self, server: &str, scope: Scope, identity: &Identity, call_id: &str) -> InstanceKey {
        // A caller with a pid is a process on this machine (the socket's peer, `mcpx
        // serve`): its cwd is a path here. Nothing else sets a pid.
        let here = self.node.get().filter(|_| identity.pid.is_some());
        let owner = match derive(scope, identity, call_id, here) {
            Ok(owner) => owner,
            Err(reason) => {
                self.log_once(server, scope, reason);
                Owner::Call(call_id.to_owned())
            }
        };
        InstanceKey { server: server.to_owned(), owner }
    }

    /// The instance that lists `server`'s tools, prompts or resources for this caller: the
    /// one [`Scoper::key`] gives, except that a caller whose scope degraded to `call` and
    /// who carries no session, cwd or pid lists through the server's lister. Nothing
    /// but listings may be sent to the instance this returns. A server scoped `call` on
    /// purpose keeps an instance per call for its listings too.
    pub fn listing_key(&self, server: &str, scope: Scope, identity: &Identity, call_id: &str) -> InstanceKey {
        let key = self.key(server, scope, identity, call_id);
        let anonymous =
            identity.session.is_none() && identity.cwd.is_none() && identity.pid.is_none() && identity.host.is_none();
        if key.is_per_call() && scope != Scope::Call && anonymous {
            // One per principal: token holders share no instance they did not ask to share.
            return InstanceKey { server: server.to_owned(), owner: Owner::Lister(identity.principal.clone()) };
        }
        key
    }

    fn log_once(&self, server: &str, scope: Scope, reason: &'static str) {
        let first = self.logged.lock().expect("scoper lock").insert((server.to_owned(), scope, reason));
        if first {
            tracing::warn!(
                server,
                scope = scope.as_str(),
                "scope {:?} of server {server:?} cannot be honoured: {reason}; serving each call with its own instance. {}",
                scope.as_str(),
                fix_for(scope)
            );
        }
    }
}

fn derive(scope: Scope, identity: &Identity, call_id: &str, here: Option<&String>) -> Result<Owner, &'static str> {
    let place = |path: PathBuf| Place { path, node: here.cloned(), principal: identity.principal.clone() };
    let cwd = || identity.cwd.clone().ok_or("the caller's cwd is unknown on this transport");
    match scope {
        Scope::Global => Ok(Owner::Everyone),
        Scope::User => Ok(Owner::User(identity.principal.clone())),
        Scope::Call => Ok(Owner::Call(call_id.to_owned())),
        Scope::Session => identity.session_key().map(Owner::Session).ok_or("the request names no session"),
        Scope::Pid => identity.pid.map(Owner::Pid).ok_or("the caller's pid is unknown on this transport"),
        Scope::Cwd => cwd().map(|dir| Owner::Cwd(place(dir))),
        Scope::Repo | Scope::Worktree => {
            let git = GitDirs::find(&cwd()?).ok_or("the caller's cwd is not inside a git repository")?;
            Ok(match scope {
                Scope::Repo => Owner::Repo(place(git.common_dir)),
                _ => Owner::Worktree(place(git.top_level)),
            })
        }
    }
}

fn fix_for(scope: Scope) -> &'static str {
    match scope {
        Scope::Global | Scope::User | Scope::Call => "",
        Scope::Session => {
            "To share an instance across requests, name a session in _meta (a key of transport.sessionMetaKeys, e.g. \"dev.mcpx/session\") or use a legacy session."
        }
        Scope::Pid => "Connect through `mcpx serve` (stdio), which tells the daemon the caller's process and cwd.",
        _ => {
            "Connect through `mcpx serve` (stdio), which tells the daemon the caller's process and cwd, or declare `roots` over HTTP (a client other than the local user names only directories its `clients.<client>.roots` grants)."
        }
    }
}

/// Where a working tree's git data lives, read from the file system (never from `GIT_DIR`
/// in mcpx's own environment, which belongs to whoever started the daemon).
#[derive(Debug, PartialEq)]
pub struct GitDirs {
    /// The directory holding `.git`: one per worktree.
    pub top_level: PathBuf,
    /// The repository's shared git directory: one per repository, across its worktrees.
    pub common_dir: PathBuf,
}

impl GitDirs {
    pub fn find(start: &Path) -> Option<GitDirs> {
        for dir in start.ancestors() {
            let dot_git = dir.join(".git");
            if dot_git.is_dir() {
                return Some(GitDirs { top_level: dir.to_owned(), common_dir: canonical(&dot_git) });
            }
            if dot_git.is_file() {
                // A linked worktree: ".git" says "gitdir: <path>", whose "commondir" names the shared one.
                let text = read_small_file(&dot_git)?;
                let git_dir = dir.join(text.strip_prefix("gitdir:")?.trim());
                let common = match read_small_file(&git_dir.join("commondir")) {
                    Some(rel) => git_dir.join(rel.trim()),
                    None => git_dir,
                };
                return Some(GitDirs { top_level: dir.to_owned(), common_dir: canonical(&common) });
            }
        }
        None
    }
}

/// The most of a `.git` or `commondir` file read: each holds one path.
const GIT_FILE_MAX: u64 = 4096;

/// A regular file's text, up to [`GIT_FILE_MAX`] bytes. The caller's cwd names where to
/// look, so whoever can write there chooses what is found: a FIFO would hold the runtime
/// worker reading it until someone wrote to it, so the file is opened without blocking and
/// read only if it is a regular file.
fn read_small_file(path: &Path) -> Option<String> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let file = std::fs::File::from(rustix::fs::open(path, flags, Mode::empty()).ok()?);
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(GIT_FILE_MAX).read_to_string(&mut text).ok()?;
    Some(text)
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Identity, Principal, Session, Source, Transport};

    fn identity(session: Option<&str>, cwd: Option<&Path>) -> Identity {
        let session = session.map(|s| Session::Named(s.into()));
        let transport = Transport { session, cwd: cwd.map(Into::into), ..Default::default() };
        Identity { source: Source::Transport, ..Identity::resolve(None, &[], &transport) }
    }

    #[test]
    fn sessions_key_their_own_instances() {
        let s = Scoper::default();
        let a = s.key("b", Scope::Session, &identity(Some("a"), None), "c1");
        let a2 = s.key("b", Scope::Session, &identity(Some("a"), None), "c2");
        let b = s.key("b", Scope::Session, &identity(Some("b"), None), "c3");
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_eq!(a.owner.to_string(), "session:a");
    }

    #[test]
    fn a_scope_without_what_it_needs_degrades_to_the_call() {
        let s = Scoper::default();
        let k = s.key("b", Scope::Session, &identity(None, None), "c9");
        assert_eq!(k.owner.to_string(), "call:c9");
        assert!(k.is_per_call());
        assert_eq!(s.key("b", Scope::Cwd, &identity(Some("a"), None), "c10").owner.to_string(), "call:c10");
        assert_eq!(s.key("b", Scope::Global, &identity(None, None), "c11").owner.to_string(), "global");
    }

    #[test]
    fn an_instance_names_the_process_it_outlives_by_at_most_a_tick_whoever_the_principal() {
        let s = Scoper::default();
        for principal in [Principal::Local, Principal::Token("ci".into())] {
            let process =
                Transport { session: Some(Session::Process(42)), pid: Some(42), principal, ..Default::default() };
            let caller = Identity::resolve(None, &[], &process);
            assert_eq!(s.key("b", Scope::Session, &caller, "c1").process(), Some(42));
            assert_eq!(s.key("b", Scope::Pid, &caller, "c2").process(), Some(42));
            assert_eq!(s.key("b", Scope::Global, &caller, "c3").process(), None);
        }
        assert_eq!(s.key("b", Scope::Session, &identity(Some("42"), None), "c4").process(), None);
    }

    #[test]
    fn in_a_cluster_a_local_callers_directory_names_the_node_and_a_named_one_does_not() {
        let s = Scoper::default();
        let dir = std::env::temp_dir();
        let local = |pid: Option<u32>| {
            let transport = Transport { cwd: Some(dir.clone()), pid, ..Default::default() };
            Identity::resolve(None, &[], &transport)
        };
        assert_eq!(s.key("b", Scope::Cwd, &local(Some(7)), "c1").owner.to_string(), format!("cwd:{}", dir.display()));
        s.join_cluster("n1");
        let here = s.key("b", Scope::Cwd, &local(Some(7)), "c2");
        assert_eq!(here.owner.to_string(), format!("cwd:[n1]{}", dir.display()));
        // A directory a caller named over the network (its roots: no pid) is no machine's.
        let named = s.key("b", Scope::Cwd, &local(None), "c3");
        assert_eq!(named.owner.to_string(), format!("cwd:{}", dir.display()));
        assert_ne!(here, named);
    }

    #[test]
    fn listings_of_a_caller_with_nothing_to_key_on_go_to_the_lister() {
        let s = Scoper::default();
        let nobody = identity(None, None);
        let listing = s.listing_key("b", Scope::Session, &nobody, "c1");
        assert_eq!(listing.owner.to_string(), "lister");
        assert_eq!(s.listing_key("b", Scope::Cwd, &nobody, "c2"), listing);
        // Its calls and reads keep an instance each.
        assert_eq!(s.key("b", Scope::Session, &nobody, "c3").owner.to_string(), "call:c3");
        // A caller with a session, or a cwd, never lists through the lister.
        assert_eq!(s.listing_key("b", Scope::Session, &identity(Some("a"), None), "c4").owner.to_string(), "session:a");
        assert_eq!(s.listing_key("b", Scope::Cwd, &identity(Some("a"), None), "c5").owner.to_string(), "call:c5");
        assert_eq!(
            s.listing_key("b", Scope::Repo, &identity(None, Some(Path::new("/nonexistent/x"))), "c6").owner.to_string(),
            "call:c6"
        );
        // Neither does a server scoped per call on purpose, nor a global one.
        assert_eq!(s.listing_key("b", Scope::Call, &nobody, "c7").owner.to_string(), "call:c7");
        assert_eq!(s.listing_key("b", Scope::Global, &nobody, "c8").owner.to_string(), "global");
    }

    #[test]
    fn each_token_holder_lists_through_a_lister_of_its_own_and_sees_only_that_one() {
        let s = Scoper::default();
        let holder = |name: &str| {
            Identity::resolve(None, &[], &Transport { principal: Principal::Token(name.into()), ..Default::default() })
        };
        let (ci, bot) = (holder("ci"), holder("bot"));
        let (for_ci, for_bot) =
            (s.listing_key("b", Scope::Session, &ci, "c1"), s.listing_key("b", Scope::Session, &bot, "c2"));
        assert_ne!(for_ci, for_bot);
        assert_ne!(for_ci.owner, Owner::Lister(Principal::Local), "the local user's lister is not a token holder's");
        assert!(
            for_ci.owner.is_visible_to(&ci.principal)
                && !for_bot.owner.is_visible_to(&ci.principal)
                && !Owner::Lister(Principal::Local).is_visible_to(&ci.principal)
        );
    }

    #[test]
    fn each_principal_has_one_user_instance_whatever_its_sessions() {
        let s = Scoper::default();
        let caller = |principal: Principal, session: Option<&str>| {
            let transport =
                Transport { principal, session: session.map(|s| Session::Named(s.into())), ..Default::default() };
            Identity::resolve(None, &[], &transport)
        };
        let alice = Principal::OAuth { issuer: "https://a".into(), subject: "alice".into() };
        let key = |who: &Identity, call: &str| s.key("b", Scope::User, who, call);
        let first = key(&caller(alice.clone(), None), "c1");
        assert_eq!(first, key(&caller(alice.clone(), Some("work")), "c2"), "one instance across sessions and calls");
        assert_ne!(first, key(&caller(Principal::Token("alice".into()), None), "c3"), "a token named alice");
        let other_issuer = Principal::OAuth { issuer: "https://b".into(), subject: "alice".into() };
        assert_ne!(first, key(&caller(other_issuer, None), "c4"), "another issuer's alice");
        assert_eq!(key(&caller(Principal::Local, None), "c5").owner.to_string(), "user");
        assert!(first.owner.is_visible_to(&alice) && !first.owner.is_visible_to(&Principal::Token("alice".into())));
    }

    #[test]
    fn git_dirs_are_read_from_the_file_system() {
        let root = std::env::temp_dir().join(format!("mcpx-scope-test-{}", std::process::id()));
        let main = root.join("main");
        let linked = root.join("linked");
        std::fs::create_dir_all(main.join(".git/worktrees/linked")).unwrap();
        std::fs::create_dir_all(main.join("src/deep")).unwrap();
        std::fs::create_dir_all(&linked).unwrap();
        std::fs::write(main.join(".git/worktrees/linked/commondir"), "../..\n").unwrap();
        std::fs::write(linked.join(".git"), format!("gitdir: {}\n", main.join(".git/worktrees/linked").display()))
            .unwrap();
        let from_main = GitDirs::find(&main.join("src/deep")).unwrap();
        let from_linked = GitDirs::find(&linked).unwrap();
        assert_eq!(from_main.top_level, main);
        assert_eq!(from_linked.top_level, linked);
        assert_eq!(from_main.common_dir, from_linked.common_dir);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Whoever can write in a caller's cwd chooses the `.git` found there: one naming a
    /// `commondir` that is a FIFO must not hold the worker that reads it (with one worker,
    /// every caller's requests), and it names no shared git directory.
    #[test]
    fn a_fifo_where_git_data_should_be_holds_nobody() {
        let root = std::env::temp_dir().join(format!("mcpx-scope-fifo-{}", std::process::id()));
        let (tree, git_dir) = (root.join("tree"), root.join("gitdir"));
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&git_dir).unwrap();
        std::fs::write(tree.join(".git"), format!("gitdir: {}\n", git_dir.display())).unwrap();
        let made = std::process::Command::new("mkfifo").arg(git_dir.join("commondir")).status().unwrap();
        assert!(made.success(), "mkfifo");
        let (found, done) = std::sync::mpsc::channel();
        let start = tree.clone();
        std::thread::spawn(move || found.send(GitDirs::find(&start)).unwrap());
        let dirs = done
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("finding the git dirs returns, though commondir is a FIFO nobody writes")
            .expect("the .git file still names its git dir");
        assert_eq!(dirs.top_level, tree);
        assert_eq!(dirs.common_dir, canonical(&git_dir), "a FIFO names no common dir");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Isolation as an invariant, over random interleavings: many requests from random
    /// identities (sessions, cwds and pids that may be absent, clients, call ids) against
    /// servers of every scope; each instance key stands for one instance, as in the pool.
    /// No instance may ever serve two requests that its scope says must not share one.
    #[test]
    fn no_two_identities_that_must_not_share_an_instance_ever_do() {
        // xorshift64*: seeded, so a failure names a case that can be replayed.
        struct Rng(u64);
        impl Rng {
            fn next(&mut self) -> u64 {
                self.0 ^= self.0 >> 12;
                self.0 ^= self.0 << 25;
                self.0 ^= self.0 >> 27;
                self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
            }
            fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
                &items[(self.next() % items.len() as u64) as usize]
            }
        }
        // Names chosen to tempt collisions: prefixes of each other, separators, the
        // words the keys are built from. Cwds are outside any git repository, so `repo`
        // and `worktree` must degrade to the call.
        let sessions = [
            None,
            Some(Session::Named("a".into())),
            Some(Session::Named("a:b".into())),
            Some(Session::Named("session:a".into())),
            Some(Session::Named("call:1".into())),
            Some(Session::Named("global".into())),
            Some(Session::Named("process:1".into())),
            Some(Session::Named(" a".into())),
            Some(Session::Process(1)),
            Some(Session::Http("a".into())),
        ];
        let cwds =
            [None, Some("/nonexistent/mcpx/a"), Some("/nonexistent/mcpx/a:b"), Some("/nonexistent/mcpx/session:a")];
        let pids = [None, Some(1u32), Some(11), Some(111)];
        let oauth = |issuer: &str, subject: &str| Principal::OAuth { issuer: issuer.into(), subject: subject.into() };
        let principals = [
            Principal::Local,
            Principal::Token("ci".into()),
            Principal::Token("bot".into()),
            oauth("https://a", "ci"),
            oauth("https://b", "ci"),
            oauth("https://a", "bot"),
        ];
        let scopes = [
            Scope::Global,
            Scope::User,
            Scope::Session,
            Scope::Cwd,
            Scope::Repo,
            Scope::Worktree,
            Scope::Pid,
            Scope::Call,
        ];
        for seed in 1..=200u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let scoper = Scoper::default();
            // instance key → the requests it served: (identity, call id).
            let mut served: std::collections::HashMap<InstanceKey, Vec<(Identity, String)>> = Default::default();
            for call in 0..300 {
                let transport = Transport {
                    session: rng.pick(&sessions).clone(),
                    cwd: rng.pick(&cwds).map(PathBuf::from),
                    pid: *rng.pick(&pids),
                    principal: rng.pick(&principals).clone(),
                    stdio: false,
                };
                let who = Identity::resolve(None, &[], &transport);
                let scope = *rng.pick(&scopes);
                let server = format!("s-{}", scope.as_str());
                // Call ids repeat only within a call (a call may reach one server twice).
                let call_id = format!("{seed}-{}", call - call % (1 + rng.next() % 2) as usize);
                let key = scoper.key(&server, scope, &who, &call_id);
                let listing = scoper.listing_key(&server, scope, &who, &call_id);
                if listing != key {
                    // Only listings of a caller with nothing to key on, at the lister.
                    // One lister per principal.
                    assert_eq!(
                        listing.owner,
                        Owner::Lister(who.principal.clone()),
                        "seed {seed}: {listing} is not {key}"
                    );
                    assert!(
                        key.is_per_call() && who.session.is_none() && who.cwd.is_none() && who.pid.is_none(),
                        "seed {seed}: {:?} lists through the lister",
                        (&who.session, &who.cwd, who.pid, scope)
                    );
                }
                assert!(!matches!(key.owner, Owner::Lister(_)), "seed {seed}: a caller's own instance is a lister");
                let others = served.entry(key.clone()).or_default();
                for (other, other_call) in others.iter() {
                    let may_share = match scope {
                        Scope::Global => true,
                        Scope::User => who.principal == other.principal,
                        Scope::Session => {
                            who.session.is_some() && who.session == other.session && who.principal == other.principal
                                || call_id == *other_call
                        }
                        Scope::Cwd => {
                            who.cwd.is_some() && who.cwd == other.cwd && who.principal == other.principal
                                || call_id == *other_call
                        }
                        Scope::Pid => who.pid.is_some() && who.pid == other.pid || call_id == *other_call,
                        Scope::Repo | Scope::Worktree | Scope::Call => call_id == *other_call,
                    };
                    assert!(
                        may_share,
                        "seed {seed}: {key} served {:?}/{other_call} and {:?}/{call_id}",
                        (&other.session, &other.cwd, other.pid),
                        (&who.session, &who.cwd, who.pid)
                    );
                }
                others.push((who, call_id));
            }
        }
    }
}
