//! The state dir on a disk that fills up or is read-only: what mcpx writes there
//! (artifacts) fails with an error that says why, the daemon goes on serving, nothing
//! already kept is lost or left half-written, and a daemon cannot start on a read-only
//! state dir without saying so. The disk is a small tmpfs mounted over the state dir; where the tests may
//! not mount one, they say so and check nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use mcpx_e2e::{Daemon, Home, Modern, assert_serving, config, fakemcp, tag};
use serde_json::json;

/// A tmpfs of `size` mounted on `dir`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let options = format!("size={size},mode=0700");
        let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", &options, "tmpfs"]).arg(dir).output().ok()?;
        if !mounted.status.success() {
            eprintln!("not checked: cannot mount a tmpfs here: {}", String::from_utf8_lossy(&mounted.stderr).trim());
            return None;
        }
        Some(Tmpfs(dir.to_owned()))
    }

    fn remount(&self, options: &str) {
        let status = Command::new("mount").args(["-o", &format!("remount,{options}")]).arg(&self.0).status().unwrap();
        assert!(status.success(), "remount {options}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { found.extend(files_under(&path)) } else { found.push(path) }
    }
    found
}

fn keep(url: &str, name: &str, bytes: usize) -> String {
    let script = format!(
        "try {{ return await artifact({name:?}, 'x'.repeat({bytes})); }} catch (e) {{ return 'refused: ' + e.message; }}"
    );
    let reply = Modern::tools_call("mcpx_exec", json!({ "script": script })).session("disk").send(url);
    reply.result()["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_full_or_read_only_state_dir_fails_writes_clearly_and_the_daemon_serves_on() {
    let t = tag();
    let home = Home::new(&config(&[("f", fakemcp("global", &t, &[]))]));
    let Some(disk) = Tmpfs::mount(home.state_dir(), "1m") else { return };
    let mut daemon = Daemon::start_in(home, &[]);
    let url = daemon.url().to_owned();

    let first = keep(&url, "first.txt", 1000);
    assert!(first.starts_with("mcpx://artifacts/"), "{first}");

    // Fill the disk.
    let filler = daemon.state_dir().join("filler");
    let chunk = vec![0u8; 64 * 1024];
    let mut file = std::fs::File::create(&filler).unwrap();
    while std::io::Write::write_all(&mut file, &chunk).is_ok() {}
    drop(file);
    let full = keep(&url, "second.txt", 200_000);
    assert!(full.starts_with("refused: ") && full.contains("second.txt") && full.contains("No space left"), "{full}");
    assert_serving(&url);
    // What was kept before is still there, whole.
    let read = Modern::new("resources/read", json!({ "uri": first })).session("disk").send(&url);
    assert_eq!(read.result()["contents"][0]["text"].as_str().map(str::len), Some(1000), "{read}");
    // And no half-written artifact was left behind, listed or not.
    let listed = Modern::new("resources/list", json!({})).session("disk").send(&url);
    let uris: Vec<&str> = listed.result()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter(|u| u.starts_with("mcpx://artifacts/"))
        .collect();
    assert_eq!(uris, vec![first.as_str()], "{listed}");
    let files = files_under(&daemon.state_dir().join("artifacts"));
    assert_eq!(files.len(), 2, "the first artifact and its record, nothing else: {files:?}");

    std::fs::remove_file(&filler).unwrap();
    let after = keep(&url, "third.txt", 1000);
    assert!(after.starts_with("mcpx://artifacts/"), "room again, the next artifact is kept: {after}");

    // A read-only state dir (remounted so once the daemon let go of its files): a daemon
    // cannot start on it, and says why.
    daemon.stop();
    disk.remount("ro");
    let restart = daemon.home().cli(&["daemon", "--port", "0"]);
    assert_ne!(restart.code, Some(0), "{restart}");
    assert!(restart.stderr.contains("Read-only file system"), "{restart}");
    drop(daemon);
    drop(disk);
}
