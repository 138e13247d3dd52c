//! Where the daemon's config comes from: only a file the user chose (`--config`,
//! `$MCPX_CONFIG`, the user's config dir), never one found from the cwd, and never one
//! someone else may have written. A hostile file's server command would leave a marker
//! file; no marker means it never ran.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcpx_e2e::planted::OTHER_UID;
use mcpx_e2e::{Daemon, Home, config, fakemcp, poll, processes_with, tag};
use serde_json::{Value, json};

/// A server entry that leaves `marker` behind when it starts, then serves as fakemcp.
fn leaves_marker(marker: &Path, tag: &str) -> Value {
    let script = format!("touch '{}'; exec '{}' --tag '{tag}'", marker.display(), mcpx_e2e::paths::fakemcp().display());
    json!({"command": "/bin/sh", "args": ["-c", script]})
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The user's own config in `<root>/xdg/mcpx/config.json`; the `XDG_CONFIG_HOME` to use.
fn user_config_dir(root: &Path, config: &Value) -> PathBuf {
    let xdg = root.join("xdg");
    std::fs::create_dir_all(xdg.join("mcpx")).expect("the user's config dir");
    std::fs::write(xdg.join("mcpx/config.json"), config.to_string()).expect("the user's config");
    xdg
}

#[test]
fn a_repository_config_never_chooses_what_the_daemon_runs() {
    let (mine, theirs) = (tag(), tag());
    let home = Home::new(&config(&[]));
    let xdg = user_config_dir(home.root(), &config(&[("notes", fakemcp("global", &mine, &[]))]));
    // A cloned repository shipping a config that shadows the user's server by name; the
    // command runs in a folder below it, as an agent host would.
    let repo = home.root().join("repo");
    let below = repo.join("src/deep");
    std::fs::create_dir_all(&below).expect("the repository");
    let marker = home.root().join("repo-command-ran");
    let hostile = config(&[("notes", leaves_marker(&marker, &theirs))]);
    std::fs::write(repo.join(".mcpx.json"), hostile.to_string()).expect("the repository's .mcpx.json");

    // `mcpx serve` with no daemon running starts one: with the user's config.
    let xdg_text = xdg.to_str().expect("a UTF-8 path");
    let mut serve = home.serve().without_config().cwd(&below).env("XDG_CONFIG_HOME", xdg_text).start();
    let answered = serve.whoami("notes");
    assert!(processes_with(&mine).contains(&answered.pid), "the user's own server must answer: {answered:?}");
    assert!(!marker.exists(), "the repository's command ran as the user");
    let stderr = serve.stderr();
    assert!(
        stderr.contains(&format!("ignoring {}", repo.join(".mcpx.json").display())) && stderr.contains("--config"),
        "the ignored file is named once, with how to use it deliberately:\n{stderr}"
    );
    drop(serve);
    home.stop_daemons();

    // A plain CLI command there starts the daemon with the user's config too.
    let ls = home.mcpx().current_dir(&below).env("XDG_CONFIG_HOME", &xdg).arg("ls").output().expect("run mcpx ls");
    let (stdout, stderr) = (String::from_utf8_lossy(&ls.stdout), String::from_utf8_lossy(&ls.stderr));
    assert!(ls.status.success() && stdout.contains("whoami"), "mcpx ls:\n{stdout}\n{stderr}");
    assert!(!marker.exists(), "the repository's command ran as the user:\n{stdout}\n{stderr}");
    assert!(stderr.contains("ignoring") && stderr.contains(".mcpx.json"), "{stderr}");
    assert!(processes_with(&theirs).is_empty(), "the repository's server runs");
    home.stop_daemons();

    // Planted by another user in a shared sticky folder (like /tmp) above the project.
    let shared = home.root().join("shared");
    let project = shared.join("project");
    std::fs::create_dir_all(&project).expect("the project");
    chmod(&shared, 0o1777);
    let planted_marker = home.root().join("planted-command-ran");
    let planted = shared.join(".mcpx.json");
    std::fs::write(&planted, config(&[("notes", leaves_marker(&planted_marker, &theirs))]).to_string())
        .expect("the planted .mcpx.json");
    chmod(&planted, 0o644);
    std::os::unix::fs::chown(&planted, Some(OTHER_UID), Some(OTHER_UID)).expect("chown");
    let ls = home.mcpx().current_dir(&project).env("XDG_CONFIG_HOME", &xdg).arg("ls").output().expect("run mcpx ls");
    let (stdout, stderr) = (String::from_utf8_lossy(&ls.stdout), String::from_utf8_lossy(&ls.stderr));
    assert!(ls.status.success() && stdout.contains("whoami"), "mcpx ls:\n{stdout}\n{stderr}");
    assert!(!planted_marker.exists(), "another user's planted command ran as this one:\n{stdout}\n{stderr}");
    assert!(processes_with(&theirs).is_empty(), "the planted server runs");
}

/// How a test runs mcpx: what it is called in a failure, its arguments, its variables.
type Run<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);

/// One config file someone else may have written, and what the refusal must name.
struct Hostile {
    what: &'static str,
    file: PathBuf,
    /// Words the refusal must hold (the path at fault is checked separately).
    why: String,
    at_fault: PathBuf,
}

/// Configs in places others control: the file (owned by another uid, writable by others or
/// its group) or a folder above it (owned by another uid, writable by others).
fn hostile_configs(root: &Path, server: &Value) -> Vec<Hostile> {
    let text = config(&[("notes", server.clone())]).to_string();
    let place = |name: &str| {
        let dir = root.join(name).join("mcpx");
        std::fs::create_dir_all(&dir).expect("a config dir");
        let file = dir.join("config.json");
        std::fs::write(&file, &text).expect("a config");
        chmod(&file, 0o644);
        file
    };
    let owned = place("owned");
    std::os::unix::fs::chown(&owned, Some(OTHER_UID), Some(OTHER_UID)).expect("chown");
    let world = place("world");
    chmod(&world, 0o666);
    let group = place("group");
    chmod(&group, 0o664);
    let open_folder = place("open-folder");
    let open = open_folder.parent().unwrap().to_owned();
    chmod(&open, 0o777);
    let their_folder = place("their-folder");
    let theirs = their_folder.parent().unwrap().parent().unwrap().to_owned();
    std::os::unix::fs::chown(&theirs, Some(OTHER_UID), Some(OTHER_UID)).expect("chown");
    vec![
        Hostile {
            what: "a file another uid owns",
            why: format!("belongs to uid {OTHER_UID}"),
            at_fault: owned.clone(),
            file: owned,
        },
        Hostile {
            what: "a world-writable file",
            why: "writable by its group and others".into(),
            at_fault: world.clone(),
            file: world,
        },
        Hostile {
            what: "a group-writable file",
            why: "writable by its group".into(),
            at_fault: group.clone(),
            file: group,
        },
        Hostile {
            what: "a file in a world-writable folder",
            why: "writable by its group and others".into(),
            at_fault: open,
            file: open_folder,
        },
        Hostile {
            what: "a file under a folder another uid owns",
            why: format!("belongs to uid {OTHER_UID}"),
            at_fault: theirs,
            file: their_folder,
        },
    ]
}

#[test]
fn a_config_someone_else_may_have_written_is_refused_and_nothing_starts() {
    let theirs = tag();
    let home = Home::new(&config(&[]));
    let marker = home.root().join("hostile-command-ran");
    for hostile in hostile_configs(home.root(), &leaves_marker(&marker, &theirs)) {
        let path = hostile.file.to_str().expect("a UTF-8 path");
        let names = |stderr: &str| {
            stderr.contains(path)
                && stderr.contains(&hostile.why)
                && stderr.contains(&hostile.at_fault.display().to_string())
        };
        let runs: [Run; 5] = [
            ("mcpx daemon --config", &["daemon", "--port", "0", "--config", path], &[]),
            ("mcpx ls --config", &["ls", "--config", path], &[]),
            ("MCPX_CONFIG=… mcpx ls", &["ls"], &[("MCPX_CONFIG", path)]),
            ("mcpx config check", &["config", "check", "--config", path], &[]),
            ("mcpx serve --no-daemon", &["serve", "--no-daemon", "--config", path], &[]),
        ];
        for (how, args, env) in runs {
            let run = home.cli_with_env(env, args);
            assert_ne!(run.code, Some(0), "{how} with {} must be refused:\n{run}", hostile.what);
            assert!(
                names(&run.stderr),
                "{how} with {}: the refusal names the file, the path at fault and why:\n{run}",
                hostile.what
            );
            assert!(home.daemons().is_empty(), "{how} with {}: a daemon runs", hostile.what);
            assert!(!marker.exists(), "{how} with {}: its command ran as the user", hostile.what);
        }
    }
}

#[test]
fn a_config_under_a_sticky_shared_folder_is_the_users_when_the_names_beneath_are() {
    let mine = tag();
    let home = Home::new(&config(&[]));
    // Like /tmp: anyone may add names, only a name's owner may replace it.
    let shared = home.root().join("shared");
    std::fs::create_dir_all(shared.join("mine")).expect("folders");
    chmod(&shared, 0o1777);
    let file = shared.join("mine/config.json");
    std::fs::write(&file, config(&[("notes", fakemcp("global", &mine, &[]))]).to_string()).expect("a config");
    let path = file.to_str().expect("a UTF-8 path");
    let ls = home.cli(&["ls", "--config", path]);
    ls.assert_code(0);
    assert!(ls.stdout.contains("whoami"), "{ls}");
}

#[test]
fn a_reload_from_a_config_others_may_now_write_is_refused_and_the_last_good_one_stays() {
    let (mine, theirs) = (tag(), tag());
    let daemon = Daemon::start(&config(&[("notes", fakemcp("global", &mine, &[]))]));
    let home = daemon.home();
    let dir = daemon.config_path().parent().expect("the config's folder").to_owned();
    let marker = home.root().join("reloaded-command-ran");
    chmod(&dir, 0o777);
    let hostile = config(&[("notes", leaves_marker(&marker, &theirs)), ("extra", leaves_marker(&marker, &theirs))]);
    std::fs::write(daemon.config_path(), hostile.to_string()).expect("rewrite the config");
    let refused = poll(Duration::from_secs(10), || {
        let log = daemon.stderr();
        log.lines()
            .any(|l| l.contains("config not applied") && l.contains(&format!("the folder {}", dir.display())))
            .then_some(())
    });
    assert!(refused.is_some(), "the reload must be refused, naming the folder:\n{}", daemon.stderr());
    let path = daemon.config_path().to_str().unwrap().to_owned();
    let ls = home.cli(&["ls", "--json", "--config", &path]);
    ls.assert_code(0);
    assert!(!ls.stdout.contains("extra"), "the refused config's server is listed:\n{ls}");
    assert!(!marker.exists(), "the refused config's command ran");
    assert!(!processes_with(&mine).is_empty(), "the last good config's server serves");
}

/// A symlink another uid owns, on the way to the user's own config: the file it points to
/// today is the user's, but its owner may point it elsewhere at any moment, even between
/// the check and the read. In a sticky folder the link is such a name beneath; elsewhere
/// it may be a hop between two links, outside both the path given and the file reached.
#[test]
fn a_symlink_another_uid_owns_on_the_way_to_the_users_config_is_refused() {
    let mine = tag();
    let home = Home::new(&config(&[]));
    let own = home.root().join("own/mcpx");
    std::fs::create_dir_all(&own).expect("the user's folder");
    let file = own.join("config.json");
    std::fs::write(&file, config(&[("notes", fakemcp("global", &mine, &[]))]).to_string()).expect("a config");
    chmod(&file, 0o644);

    // Like /tmp, where the kernel may follow another uid's link (fs.protected_symlinks off).
    let shared = home.root().join("shared");
    std::fs::create_dir_all(&shared).expect("the shared folder");
    chmod(&shared, 0o1777);
    let link = shared.join("config.json");
    std::os::unix::fs::symlink(&file, &link).expect("a link");
    std::os::unix::fs::lchown(&link, Some(OTHER_UID), Some(OTHER_UID)).expect("lchown");

    // A link of the user's that leads through a folder another uid may write to.
    let open = home.root().join("open");
    std::fs::create_dir_all(&open).expect("an open folder");
    chmod(&open, 0o777);
    let hop = open.join("hop.json");
    std::os::unix::fs::symlink(&file, &hop).expect("the hop, the user's own link but in a folder anyone may write");
    let through = own.join("through.json");
    std::os::unix::fs::symlink(&hop, &through).expect("a link through the hop");

    let cases = [
        (link.clone(), link.clone(), format!("belongs to uid {OTHER_UID}")),
        (through.clone(), open.clone(), "writable by its group and others".to_owned()),
    ];
    for (given, at_fault, why) in cases {
        let path = given.to_str().expect("a UTF-8 path");
        for args in [&["ls", "--config", path][..], &["config", "check", "--config", path]] {
            let run = home.cli(args);
            assert_ne!(run.code, Some(0), "{args:?} through a link another uid controls must be refused:\n{run}");
            assert!(
                run.stderr.contains(&why) && run.stderr.contains(&at_fault.display().to_string()),
                "{args:?}: the refusal names {} and why ({why}):\n{run}",
                at_fault.display()
            );
            assert!(home.daemons().is_empty(), "{args:?}: a daemon runs");
        }
    }
    // The same file by its own name is the user's.
    let ls = home.cli(&["ls", "--config", file.to_str().unwrap()]);
    ls.assert_code(0);
    assert!(ls.stdout.contains("whoami"), "{ls}");
}

/// `$MCPX_CONFIG` is set once and read from every directory a command runs in: a relative
/// one would let the cwd (a cloned repository holding a file of that name) choose the
/// config after all.
#[test]
fn a_relative_mcpx_config_is_refused_and_the_cwd_never_chooses() {
    let theirs = tag();
    let home = Home::new(&config(&[]));
    // The cwd of every command here is the home's root: a repository's file there.
    let marker = home.root().join("repository-command-ran");
    let planted = home.root().join("repo-mcpx.json");
    std::fs::write(&planted, config(&[("notes", leaves_marker(&marker, &theirs))]).to_string())
        .expect("the repository's mcpx.json");
    chmod(&planted, 0o644);
    for args in [&["ls"][..], &["config", "check"]] {
        let run = home.cli_with_env(&[("MCPX_CONFIG", "repo-mcpx.json")], args);
        assert_ne!(run.code, Some(0), "{args:?} with a relative MCPX_CONFIG must be refused:\n{run}");
        assert!(
            run.stderr.contains("MCPX_CONFIG") && run.stderr.contains("absolute"),
            "{args:?}: the refusal names MCPX_CONFIG and why:\n{run}"
        );
        assert!(home.daemons().is_empty(), "{args:?}: a daemon runs");
        assert!(!marker.exists(), "{args:?}: the repository's command ran as the user");
        assert!(processes_with(&theirs).is_empty(), "{args:?}: the repository's server runs");
    }
    // The same for the user's config dir: a relative `$XDG_CONFIG_HOME` is no place.
    std::fs::create_dir_all(home.root().join("repo-xdg/mcpx")).expect("a repository's folder");
    std::fs::copy(&planted, home.root().join("repo-xdg/mcpx/config.json")).expect("the repository's config");
    let run = home.cli_with_env(&[("XDG_CONFIG_HOME", "repo-xdg")], &["ls"]);
    assert!(!marker.exists(), "a relative XDG_CONFIG_HOME chose the repository's config:\n{run}");
    assert!(processes_with(&theirs).is_empty(), "a relative XDG_CONFIG_HOME: the repository's server runs");
}
