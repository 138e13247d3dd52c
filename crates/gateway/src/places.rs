//! Which directories a caller may name as the place it works in (its roots, or a place a
//! relaying node names for it), where `cwd`, `repo` and `worktree` scoped servers start.
//!
//! The daemon's owner (the local user) names any directory: they are its own. Any other
//! principal names only what `clients.<client>.roots` grants it, none by default. A
//! directory outside a caller's grants is not used at all: the request goes on as one
//! that named no place (its scope degrades to `call`), and the directory is never
//! stat'ed, searched for `.git` or started in.
//!
//! A path is matched in its normal form. Its text is normalised first (`.` and `..` taken
//! out), and a text outside the grants is refused without touching the file system; then
//! symlinks are resolved, and the real path must be inside the grants too. So neither
//! `<granted>/../elsewhere` nor a symlink in a granted directory leads out of it. For a
//! `repo` or `worktree` scoped server the repository must be inside the grants as well
//! (its top level and its git directory), or the place is not used.

use std::path::{Component, Path, PathBuf};

use crate::config::Config;
use crate::identity::Principal;
use crate::policy::{client_key, glob_matches};
use crate::scope::{GitDirs, Scope};

/// The directory `principal` may work in when it names `path`: `path` itself for the
/// owner; for anyone else its real path, if that and the text it was named by are both
/// inside the principal's grants. Otherwise why not, for the log.
pub fn granted(config: &Config, principal: &Principal, path: &Path) -> Result<PathBuf, String> {
    if *principal == Principal::Local {
        return Ok(path.to_owned());
    }
    let key = client_key(principal);
    let grants = grants(config, principal);
    if grants.is_empty() {
        return Err(format!("{key} is granted no directories (clients.\"{key}\".roots)"));
    }
    let named = normal_text(path).ok_or_else(|| format!("{path:?} is not an absolute path"))?;
    if !grants.iter().any(|grant| path_matches(grant, &named)) {
        return Err(format!("{named:?} is outside the directories granted to {key}"));
    }
    let real = named.canonicalize().map_err(|e| format!("{named:?}: {e}"))?;
    if !real.is_dir() {
        return Err(format!("{real:?} is not a directory"));
    }
    if !grants.iter().any(|grant| path_matches(grant, &real)) {
        return Err(format!("{named:?} resolves to {real:?}, outside the directories granted to {key}"));
    }
    Ok(real)
}

/// The directories `config` grants `principal` (`clients.<client>.roots`).
fn grants<'c>(config: &'c Config, principal: &Principal) -> &'c [String] {
    config.clients.get(&client_key(principal)).map(|c| c.roots.as_slice()).unwrap_or_default()
}

/// Where a caller of `principal` works on `server` when it names `dir`: [`granted`], and
/// for a `repo` or `worktree` server its repository granted too. Otherwise why not. The
/// one rule for a named place, wherever it arrives (a roots answer, a relayed request).
pub(crate) fn place_for(config: &Config, principal: &Principal, server: &str, dir: &Path) -> Result<PathBuf, String> {
    let scope = config.server(server).map(|s| s.scope).unwrap_or_default();
    granted(config, principal, dir).and_then(|place| match scope {
        Scope::Repo | Scope::Worktree => repository_granted(config, principal, place),
        _ => Ok(place),
    })
}

impl crate::Gateway {
    /// The directory a caller of `principal` works in when it names `dir` (its roots),
    /// or `None` when it may not name it: then its request goes on as one that named no
    /// place, and the refusal is logged with the reason.
    pub(crate) fn place_named(&self, principal: &Principal, server: &str, dir: PathBuf) -> Option<PathBuf> {
        match place_for(&self.settings.config(), principal, server, &dir) {
            Ok(place) => Some(place),
            Err(why) => {
                tracing::warn!(
                    server,
                    "a directory the caller named is not used: {why}; its request is served as one that named no place"
                );
                None
            }
        }
    }

    /// Whether a caller of `principal` may name any directory at all: the owner, or a
    /// client with `roots` granted. Nobody else is asked for its roots.
    pub(crate) fn may_name_places(&self, principal: &Principal) -> bool {
        *principal == Principal::Local || !grants(&self.settings.config(), principal).is_empty()
    }
}

/// A granted `place` for a `repo` or `worktree` scoped server, when the repository it is
/// in is granted too: its top level and its shared git directory (which a `.git` file in
/// the place names, and whoever writes there chooses). The owner's are never checked.
fn repository_granted(config: &Config, principal: &Principal, place: PathBuf) -> Result<PathBuf, String> {
    if *principal == Principal::Local {
        return Ok(place);
    }
    let Some(git) = GitDirs::find(&place) else { return Ok(place) };
    let key = client_key(principal);
    let grants = grants(config, principal);
    for (what, dir) in [("top level", &git.top_level), ("git directory", &git.common_dir)] {
        if !grants.iter().any(|grant| path_matches(grant, dir)) {
            return Err(format!(
                "the repository of {place:?} has its {what} {dir:?}, outside the directories granted to {key}"
            ));
        }
    }
    Ok(place)
}

/// An absolute path with `.` and `..` taken out by its text alone (`..` at the root stays
/// at the root, as the kernel has it); `None` for a relative path.
fn normal_text(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut normal = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => normal.push(part),
            Component::ParentDir => {
                normal.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(normal)
}

/// Whether an absolute path matches a grant, component by component: `**` stands for any
/// number of directories (none included), and within one component `*` for any run of
/// characters and `?` for one. A path that is not UTF-8 matches only what `**` covers.
pub fn path_matches(grant: &str, path: &Path) -> bool {
    let pattern: Vec<&str> = grant.split('/').filter(|c| !c.is_empty()).collect();
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part.to_str().map(str::to_owned).unwrap_or_else(|| "\u{0}".to_owned())),
            _ => None,
        })
        .collect();
    components_match(&pattern, &parts)
}

fn components_match(pattern: &[&str], parts: &[String]) -> bool {
    match pattern.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|skip| components_match(rest, &parts[skip..])),
        Some((first, rest)) => parts.split_first().is_some_and(|(part, others)| {
            !part.contains('\u{0}') && glob_matches(first, part) && components_match(rest, others)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_matches_by_component() {
        assert!(path_matches("/srv/work/**", Path::new("/srv/work")));
        assert!(path_matches("/srv/work/**", Path::new("/srv/work/a/b")));
        assert!(!path_matches("/srv/work/**", Path::new("/srv/workshop")));
        assert!(!path_matches("/srv/work/**", Path::new("/srv")));
        assert!(path_matches("/srv/*/src", Path::new("/srv/a/src")));
        assert!(!path_matches("/srv/*/src", Path::new("/srv/a/b/src")));
        assert!(path_matches("/srv/work", Path::new("/srv/work")));
        assert!(!path_matches("/srv/work", Path::new("/srv/work/a")));
        assert!(path_matches("/**", Path::new("/")));
    }

    #[test]
    fn dot_segments_are_taken_out_before_matching() {
        assert_eq!(normal_text(Path::new("/srv/work/../etc")), Some(PathBuf::from("/srv/etc")));
        assert_eq!(normal_text(Path::new("/srv/./work/a/..")), Some(PathBuf::from("/srv/work")));
        assert_eq!(normal_text(Path::new("/../../etc")), Some(PathBuf::from("/etc")));
        assert_eq!(normal_text(Path::new("srv/work")), None);
    }

    #[test]
    fn a_grant_that_is_not_an_absolute_clean_glob_is_a_config_error_naming_it() {
        for (clients, what) in [
            (r#"{"token:ci": {"roots": ["srv/**"]}}"#, "not an absolute path"),
            (r#"{"token:ci": {"roots": ["/srv/../etc/**"]}}"#, "\"..\" component"),
            (r#"{"token:ci": {"roots": ["/srv/./x"]}}"#, "clients.token:ci.roots"),
            (r#"{"local": {"roots": ["/srv/**"]}}"#, "clients.local.roots"),
        ] {
            let text = format!(
                r#"{{"mcpServers": {{}}, "http": {{"tokens": {{"ci": "ci-token-0123456789"}}}}, "clients": {clients}}}"#
            );
            let e = Config::parse(&text, Path::new("t.json")).unwrap_err().to_string();
            assert!(e.contains(what), "{clients}: {e}");
        }
        let text = r#"{"http": {"tokens": {"ci": "ci-token-0123456789"}}, "clients": {"token:ci": {"roots": ["/srv/*/x/**"]}}}"#;
        assert!(Config::parse(text, Path::new("t.json")).is_ok());
    }

    #[test]
    fn a_token_holders_repository_must_be_inside_its_grants_too() {
        let root = std::env::temp_dir().join(format!("mcpx-places-git-{}", crate::context::new_call_id()));
        let (outer, planted, own) = (root.join("outer"), root.join("planted"), root.join("own"));
        for dir in [outer.join(".git"), outer.join("shared"), planted.clone(), own.join(".git")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(planted.join(".git"), format!("gitdir: {}\n", outer.join(".git").display())).unwrap();
        let root = root.canonicalize().unwrap();
        let grants = [root.join("outer/shared"), root.join("planted"), root.join("own")];
        let grants: Vec<String> = grants.iter().map(|g| format!("{}/**", g.display())).collect();
        let grants: Vec<&str> = grants.iter().map(String::as_str).collect();
        let config = config_granting("token:ci", &grants);
        let ci = Principal::Token("ci".into());
        let top = repository_granted(&config, &ci, root.join("outer/shared")).unwrap_err();
        assert!(top.contains("top level"), "{top}");
        let git_dir = repository_granted(&config, &ci, root.join("planted")).unwrap_err();
        assert!(git_dir.contains("git directory"), "{git_dir}");
        assert_eq!(repository_granted(&config, &ci, root.join("own")).unwrap(), root.join("own"));
        assert!(repository_granted(&config, &Principal::Local, root.join("outer/shared")).is_ok());
        std::fs::remove_dir_all(root).unwrap();
    }

    fn config_granting(key: &str, grants: &[&str]) -> Config {
        let mut config = Config::default();
        let client = crate::config::ClientConfig {
            roots: grants.iter().map(|g| (*g).to_owned()).collect(),
            ..Default::default()
        };
        config.clients.insert(key.to_owned(), client);
        config
    }

    #[test]
    fn only_the_owner_names_any_directory_and_others_only_their_grants() {
        let root = std::env::temp_dir().join(format!("mcpx-places-{}", crate::context::new_call_id()));
        let (work, elsewhere) = (root.join("work"), root.join("elsewhere"));
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, work.join("out")).unwrap();
        let work = work.canonicalize().unwrap();
        let grant = format!("{}/**", work.display());
        let config = config_granting("token:ci", &[&grant]);
        let ci = Principal::Token("ci".into());
        assert_eq!(granted(&config, &Principal::Local, &elsewhere).unwrap(), elsewhere);
        assert_eq!(granted(&config, &ci, &work.join("sub")).unwrap(), work.join("sub"));
        assert!(granted(&config, &ci, &work.join("../elsewhere")).is_err());
        assert!(granted(&config, &ci, &work.join("out")).unwrap_err().contains("resolves to"));
        assert!(granted(&config, &ci, &work.join("missing")).is_err());
        assert!(granted(&config, &Principal::Token("bot".into()), &work).unwrap_err().contains("granted no"));
        // An OAuth subject's grants are its own `clients` key's, never a token's of its name.
        let alice = Principal::OAuth { issuer: "https://a".into(), subject: "alice".into() };
        let mut config = config_granting("oauth:alice@https://a", &[&grant]);
        assert_eq!(granted(&config, &alice, &work).unwrap(), work);
        assert!(granted(&config, &Principal::Token("alice".into()), &work).is_err());
        config.clients.clear();
        assert!(granted(&config, &alice, &work).is_err());
        std::fs::remove_dir_all(root).unwrap();
    }
}
