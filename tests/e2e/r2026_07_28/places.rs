//! Places belong to principals: an instance keyed by a directory (`cwd`, `repo`) serves
//! only callers of the principal that named it, so a token holder naming the local
//! user's project never reaches the user's instance there. A principal other than the
//! owner names only the directories `clients.<client>.roots` grants it, in their real
//! form: a directory outside them (by `..` or a symlink too) is not used, and nothing
//! starts there.

use std::path::{Path, PathBuf};

use mcpx_e2e::answering::{Answers, answering_client, asked_methods};
use mcpx_e2e::git::{common_dir, init_repo};
use mcpx_e2e::process::TempDir;
use mcpx_e2e::{Daemon, Modern, Reply, Whoami, config, fakemcp, processes_with, tag};
use serde_json::{Value, json};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// Granted the project's directories.
const CI: &str = "ci-token-0123456789abcdef";
/// Granted no directory.
const GUEST: &str = "guest-token-0123456789abcd";

/// `lsp` (cwd-scoped) and `git` (repo-scoped) fakemcps; `ci` may name `granted/**`.
fn places_config(tag: &str, granted: &Path) -> Value {
    granting(tag, &[granted])
}

/// As [`places_config`], `ci` granted each of `granted` and what is under it.
fn granting(tag: &str, granted: &[&Path]) -> Value {
    let mut cfg = config(&[("lsp", fakemcp("cwd", tag, &[])), ("git", fakemcp("repo", tag, &[]))]);
    cfg["http"] = json!({"tokens": {"ci": CI, "guest": GUEST}});
    let roots: Vec<String> = granted.iter().map(|dir| format!("{}/**", dir.display())).collect();
    cfg["clients"] = json!({"token:ci": {"roots": roots}});
    cfg
}

/// `whoami` on `server` as the holder of `token`, a 2026 caller that declared `roots`
/// and answers mcpx's roots question (if asked) with `root`.
fn whoami_naming(daemon: &Daemon, token: &str, server: &str, root: &Path) -> Whoami {
    let call = |extra: Value| {
        let mut params = json!({"name": "mcpx_call", "arguments": {"server": server, "tool": "whoami"}});
        for (k, v) in extra.as_object().into_iter().flatten() {
            params[k] = v.clone();
        }
        Modern::new("tools/call", params)
            .meta(CAPABILITIES, json!({"roots": {}}))
            .header("Authorization", &format!("Bearer {token}"))
            .send(daemon.url())
    };
    let first = call(json!({}));
    if first.result()["resultType"] != "input_required" {
        return Whoami::of(&first);
    }
    let (key, question) = first.result()["inputRequests"].as_object().unwrap().iter().next().unwrap();
    assert_eq!(question["method"], "roots/list", "{first}");
    let answer = json!({"roots": [{"uri": format!("file://{}", root.display()), "name": "work"}]});
    let retry: Reply =
        call(json!({"inputResponses": {key.clone(): answer}, "requestState": first.result()["requestState"]}));
    Whoami::of(&retry)
}

/// `whoami` on `server` through the owner's own `mcpx call`, run in `dir`.
fn owners_whoami(daemon: &Daemon, dir: &Path, server: &str) -> Whoami {
    let run = daemon.home().cli_in(dir, &["call", &format!("{server}.whoami"), "--json"]);
    run.assert_code(0);
    Whoami::from_structured(&run.json()["structuredContent"])
}

/// The test's upstream processes working in `dir` or under it.
fn working_under(tag: &str, dir: &Path) -> Vec<(u32, PathBuf)> {
    processes_with(tag)
        .into_iter()
        .filter_map(|pid| Some((pid, std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?)))
        .filter(|(_, cwd)| cwd.starts_with(dir))
        .collect()
}

fn canonical(dir: &str) -> PathBuf {
    Path::new(dir).canonicalize().unwrap()
}

#[test]
fn a_token_holder_naming_the_owners_project_never_reaches_the_owners_instances() {
    let tag = tag();
    let dirs = TempDir::new();
    let project = init_repo(&dirs.path().join("project"), &["src"]);
    let daemon = Daemon::start(&places_config(&tag, &project));

    for server in ["lsp", "git"] {
        let owners = owners_whoami(&daemon, &project, server);
        assert_eq!(
            canonical(owners.cwd.as_deref().unwrap()),
            project,
            "{server}: the owner's instance is in its project"
        );

        // Granted the project: an instance of its own there, never the owner's.
        let ci = whoami_naming(&daemon, CI, server, &project);
        assert_ne!((ci.pid, &ci.instance), (owners.pid, &owners.instance), "{server}: ci reached the owner's instance");
        assert_eq!(canonical(ci.cwd.as_deref().unwrap()), project, "{server}: ci's own instance works in the project");
        assert_eq!(whoami_naming(&daemon, CI, server, &project).instance, ci.instance, "{server}: ci keeps its own");

        // Granted nothing: degraded to an instance for the call alone.
        let guest = whoami_naming(&daemon, GUEST, server, &project);
        assert_ne!((guest.pid, &guest.instance), (owners.pid, &owners.instance), "{server}: guest reached the owner's");
        assert_ne!((guest.pid, &guest.instance), (ci.pid, &ci.instance), "{server}: guest reached ci's");
        assert_eq!(guest.calls, 1, "{server}: guest's call shared an instance");

        let again = owners_whoami(&daemon, &project, server);
        assert_eq!((again.instance, again.calls), (owners.instance, 2), "{server}: someone else used the owner's");
    }
    let keys = daemon.home().instance_keys("git");
    assert!(
        keys.contains(&format!("repo:{}", common_dir(&project).display()))
            && keys.contains(&format!("repo@\"ci\":{}", common_dir(&project).display())),
        "one repo instance per principal: {keys:?}"
    );
}

/// The handshake era's channel for a place: a real SDK client in a 2025-11-25 session,
/// with a token, answering mcpx's `roots/list` with the owner's project. Granted it, the
/// holder gets an instance of its own there; granted nothing, it is not even asked, and
/// its call is served by an instance of its own elsewhere.
#[test]
fn over_a_legacy_session_a_token_holder_naming_the_owners_project_never_reaches_the_owners_instance() {
    let tag = tag();
    let dirs = TempDir::new();
    let project = init_repo(&dirs.path().join("project"), &["src"]);
    let daemon = Daemon::start(&places_config(&tag, &project));
    let owners = owners_whoami(&daemon, &project, "lsp");
    let whoami = json!({"server": "lsp", "tool": "whoami"});
    let naming = |token: &str| {
        let answers = Answers {
            root: Some(format!("file://{}", project.display())),
            bearer: Some(token.to_owned()),
            ..Answers::decline()
        };
        let out = answering_client(daemon.url(), "legacy", "mcpx_call", &whoami, &answers);
        assert_eq!(out["era"], "legacy", "{out}");
        (Whoami::from_structured(&out["result"]["structuredContent"]), asked_methods(&out).join(","))
    };

    let (ci, asked) = naming(CI);
    assert_eq!(asked, "roots/list", "ci, granted the project, is asked where it works");
    assert_ne!((ci.pid, &ci.instance), (owners.pid, &owners.instance), "ci reached the owner's instance");
    assert_eq!(canonical(ci.cwd.as_deref().unwrap()), project, "ci's own instance works in the project");

    let (guest, asked) = naming(GUEST);
    assert_eq!(asked, "", "guest, granted nothing, is not asked for its roots");
    assert_ne!((guest.pid, &guest.instance), (owners.pid, &owners.instance), "guest reached the owner's instance");
    assert!(!canonical(guest.cwd.as_deref().unwrap()).starts_with(&project), "guest's instance works in the project");

    let again = owners_whoami(&daemon, &project, "lsp");
    assert_eq!((again.instance, again.calls), (owners.instance, 2), "someone else used the owner's instance");
}

#[test]
fn a_token_holder_starts_nothing_in_a_directory_not_granted_to_it() {
    let tag = tag();
    let dirs = TempDir::new();
    let granted = dirs.path().join("granted");
    std::fs::create_dir_all(&granted).unwrap();
    let granted = granted.canonicalize().unwrap();
    let victim = init_repo(&dirs.path().join("victim"), &[]);
    let daemon = Daemon::start(&places_config(&tag, &granted));

    for token in [GUEST, CI] {
        for server in ["lsp", "git"] {
            let answer = whoami_naming(&daemon, token, server, &victim);
            assert!(
                !canonical(answer.cwd.as_deref().unwrap()).starts_with(&victim),
                "{server} started in {} for a caller not granted it: {answer:?}",
                victim.display()
            );
            assert_eq!(answer.calls, 1, "{server}: a refused place still keyed an instance that is kept");
        }
    }
    assert_eq!(working_under(&tag, &victim), vec![], "a process works in the directory nobody granted");
    let keys = daemon.home().instance_keys("git");
    assert!(keys.iter().all(|k| !k.starts_with("repo")), "the victim's repository keyed an instance: {keys:?}");
    let log = daemon.stderr();
    assert!(log.contains("is not used") && log.contains("outside the directories granted"), "refusal logged:\n{log}");
}

#[test]
fn a_granted_directory_is_matched_in_its_real_form_so_dot_dot_and_symlinks_lead_nowhere() {
    let tag = tag();
    let dirs = TempDir::new();
    let granted = dirs.path().join("granted");
    let outside = dirs.path().join("outside");
    std::fs::create_dir_all(granted.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let (granted, outside) = (granted.canonicalize().unwrap(), outside.canonicalize().unwrap());
    std::os::unix::fs::symlink(&outside, granted.join("out")).unwrap();
    let daemon = Daemon::start(&places_config(&tag, &granted));

    let inside = whoami_naming(&daemon, CI, "lsp", &granted.join("sub"));
    assert_eq!(canonical(inside.cwd.as_deref().unwrap()), granted.join("sub"), "a granted directory is used");
    assert_eq!(whoami_naming(&daemon, CI, "lsp", &granted.join("sub")).instance, inside.instance);

    for escape in [granted.join("../outside"), granted.join("sub/../../outside"), granted.join("out")] {
        let answer = whoami_naming(&daemon, CI, "lsp", &escape);
        assert!(
            !canonical(answer.cwd.as_deref().unwrap()).starts_with(&outside),
            "{} led out of the grant: {answer:?}",
            escape.display()
        );
        assert_eq!(answer.calls, 1, "{}: degraded to the call alone", escape.display());
    }
    assert_eq!(working_under(&tag, &outside), vec![], "a process works outside the grant");
}

/// A granted directory inside a repository that is not (a subdirectory of the owner's
/// repository, or a `.git` file planted there naming the owner's git directory) keys no
/// repo instance for the token holder, and nothing starts there for it.
#[test]
fn a_repository_reaching_outside_the_grant_is_no_place_of_the_token_holders() {
    let tag = tag();
    let dirs = TempDir::new();
    let owners = init_repo(&dirs.path().join("owners"), &["shared"]);
    let planted = dirs.path().join("planted");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join(".git"), format!("gitdir: {}\n", owners.join(".git").display())).unwrap();
    let planted = planted.canonicalize().unwrap();
    let daemon = Daemon::start(&granting(&tag, &[&owners.join("shared"), &planted]));

    for named in [owners.join("shared"), planted.clone()] {
        let answer = whoami_naming(&daemon, CI, "git", &named);
        assert!(
            !canonical(answer.cwd.as_deref().unwrap()).starts_with(dirs.path().canonicalize().unwrap()),
            "the git server started in {} for ci: {answer:?}",
            named.display()
        );
        assert_eq!(answer.calls, 1, "{}: degraded to the call alone", named.display());
    }
    let keys = daemon.home().instance_keys("git");
    assert!(keys.iter().all(|k| !k.starts_with("repo")), "a repository outside the grant keyed an instance: {keys:?}");
    assert_eq!(working_under(&tag, dirs.path()), vec![], "a process works in the owner's repository");
}

/// An OAuth subject is granted by its own `clients` key (`oauth:<subject>@<issuer>`): it
/// gets an instance of its own in the owner's project, and a subject granted nothing
/// starts nothing there.
#[test]
fn an_oauth_subject_names_only_its_own_grants_and_gets_its_own_instance() {
    use mcpx_e2e::authorization::{AuthorizationServer, Signer};
    let server = AuthorizationServer::start(&[("alice", "alice-secret-0123456789abcdef")]);
    let tag = tag();
    let dirs = TempDir::new();
    let project = init_repo(&dirs.path().join("project"), &[]);
    let mut cfg = config(&[("lsp", fakemcp("cwd", &tag, &[]))]);
    cfg["http"] = json!({"oauth": {"issuers": [server.issuer], "requestTimeout": "30s"}});
    let alice = format!("oauth:alice@{}", server.issuer);
    cfg["clients"] = json!({ alice: {"roots": [format!("{}/**", project.display())]} });
    let daemon = Daemon::start(&cfg);

    let owners = owners_whoami(&daemon, &project, "lsp");
    let token = |subject: &str| server.forge(Signer::Issuer, daemon.url(), json!({"sub": subject}));
    let alices = whoami_naming(&daemon, &token("alice"), "lsp", &project);
    assert_ne!((alices.pid, &alices.instance), (owners.pid, &owners.instance), "alice reached the owner's instance");
    assert_eq!(canonical(alices.cwd.as_deref().unwrap()), project, "alice's own instance works in the project");
    let bobs = whoami_naming(&daemon, &token("bob"), "lsp", &project);
    assert!(!canonical(bobs.cwd.as_deref().unwrap()).starts_with(&project), "bob was started in it: {bobs:?}");
    assert_ne!(bobs.instance, alices.instance, "bob reached alice's instance");
    let again = owners_whoami(&daemon, &project, "lsp");
    assert_eq!((again.instance, again.calls), (owners.instance, 2), "someone else used the owner's instance");
}
