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
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    // If mcpx dies without stopping it (SIGKILL, a crash), the child is killed too rather
    // than orphaned. What the child started is caught on the daemon's next start instead.
    let parent = process::getpid();
    // SAFETY: prctl and getppid are async-signal-safe; nothing is allocated after fork.
    unsafe {
        cmd.pre_exec(move || {
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
