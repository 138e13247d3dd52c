//! Launching a stdio upstream in its own process group, and stopping it.
//!
//! Every child is the leader of a new process group so that whatever it starts in turn
//! (`npx` → `node`, a shell → a server) is stopped with it. Stopping follows the spec's
//! order: close stdin, wait; SIGTERM the group, wait; SIGKILL the group.

use std::process::Stdio;
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{self, Pid, Signal};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::error::UpstreamError;
use crate::spec::StdioSpec;

pub(crate) struct Spawned {
    pub child: Child,
    pub pgid: Pid,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

pub(crate) fn spawn(spec: &StdioSpec) -> Result<Spawned, UpstreamError> {
    let mut cmd = Command::new(&spec.command);
    cmd.args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // A directory that must be reached without a symlink is opened here, before the fork,
    // in one step that refuses any link on its path, and the child enters it by that
    // descriptor: no later rename can send it elsewhere.
    let confined = match &spec.cwd {
        Some(dir) if spec.cwd_without_symlinks => Some(open_without_symlinks(dir).map_err(|source| {
            UpstreamError::Spawn { server: spec.server.clone(), command: spec.command.clone(), source }
        })?),
        Some(dir) => {
            cmd.current_dir(dir);
            None
        }
        None => None,
    };
    // If mcpx dies without stopping it (SIGKILL, a crash), the child is killed too rather
    // than orphaned. What the child started is caught on the daemon's next start instead.
    let parent = process::getpid();
    // SAFETY: prctl and getppid are async-signal-safe; nothing is allocated after fork.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(dir) = &confined {
                process::fchdir(dir)?;
            }
            let _ = process::set_parent_process_death_signal(Some(Signal::KILL));
            // mcpx died before the prctl took: fail, and std ends the child with status 1.
            if process::getppid() != Some(parent) {
                return Err(Errno::SRCH.into());
            }
            Ok(())
        });
    }
    let spawn_error =
        |source| UpstreamError::Spawn { server: spec.server.clone(), command: spec.command.clone(), source };
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let pgid = child
        .id()
        .and_then(|p| Pid::from_raw(p as i32))
        .ok_or_else(|| spawn_error(std::io::Error::other("the process exited before it could be registered")))?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        unreachable!("all three pipes were requested");
    };
    Ok(Spawned { child, pgid, stdin, stdout, stderr })
}

/// `dir`, opened as a directory to enter, or an error if any component of its path is a
/// symlink (`ELOOP`) or it is no directory.
fn open_without_symlinks(dir: &std::path::Path) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags, openat2};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    openat2(CWD, dir, flags, Mode::empty(), ResolveFlags::NO_SYMLINKS).map_err(|e| {
        std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!(
                "cannot enter {}: {e} (a directory another caller named is entered only with no symlink on its path)",
                dir.display()
            ),
        )
    })
}

/// Stops a child whose stdin the caller has already closed: waits, then SIGTERM, then
/// SIGKILL, each to the whole group. Returns once the leader is reaped; stragglers left
/// in the group after the leader exits get the same treatment.
pub(crate) async fn stop(child: &mut Child, pgid: Pid, grace: Duration) {
    let exited = tokio::time::timeout(grace, child.wait()).await.is_ok();
    if !exited {
        signal_group(pgid, Signal::TERM);
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            signal_group(pgid, Signal::KILL);
            let _ = child.wait().await;
        }
    }
    // The leader is gone; anything it left behind in its group goes too.
    if signal_group(pgid, Signal::TERM) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        signal_group(pgid, Signal::KILL);
    }
}

/// Sends `signal` to the process group; false when no process is left in it.
fn signal_group(pgid: Pid, signal: Signal) -> bool {
    process::kill_process_group(pgid, signal).is_ok()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    use tokio::io::AsyncReadExt;

    use super::*;
    use crate::spec::Timeouts;

    fn spec(cwd: PathBuf, cwd_without_symlinks: bool) -> StdioSpec {
        StdioSpec {
            server: "pwd".into(),
            command: "/bin/sh".into(),
            args: vec!["-c".into(), "pwd -P".into()],
            env: Vec::new(),
            cwd: Some(cwd),
            cwd_without_symlinks,
            timeouts: Timeouts::default(),
            max_line_bytes: 1 << 20,
        }
    }

    async fn working_dir(spec: &StdioSpec) -> Result<String, UpstreamError> {
        let mut spawned = spawn(spec)?;
        let mut out = String::new();
        spawned.stdout.read_to_string(&mut out).await.unwrap();
        spawned.child.wait().await.unwrap();
        Ok(out.trim_end().to_owned())
    }

    /// A directory another caller named was checked in its resolved form; if a name on
    /// its path has since become a link (swapped by someone who may write inside the
    /// grant), the child is not started through it, and a path with no link starts there.
    #[tokio::test]
    async fn a_directory_that_must_have_no_symlink_on_its_path_is_never_entered_through_one() {
        let root = std::env::temp_dir().join(format!("mcpx-stdio-cwd-{}", std::process::id()));
        let (granted, outside) = (root.join("granted"), root.join("outside"));
        std::fs::create_dir_all(&granted).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let swapped = root.join("swapped");
        let _ = std::fs::remove_file(&swapped);
        symlink(&outside, &swapped).unwrap();

        let refused = working_dir(&spec(swapped.clone(), true)).await;
        assert!(refused.is_err(), "started through a link, in {refused:?}");
        let inside = working_dir(&spec(granted.clone(), true)).await.unwrap();
        assert_eq!(PathBuf::from(inside), granted.canonicalize().unwrap());
        // The owner's own directory is entered as named, links and all.
        let owners = working_dir(&spec(swapped, false)).await.unwrap();
        assert_eq!(PathBuf::from(owners), outside.canonicalize().unwrap());
        std::fs::remove_dir_all(root).unwrap();
    }
}
