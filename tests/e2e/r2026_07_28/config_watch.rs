//! The daemon's watch on its config file: reading the file changes nothing (no reload,
//! no CPU), and a save is applied once.
//!
//! CPU time is read from `/proc/<pid>/stat` (user + system, every thread of the daemon).
//! "Idle" is observed, not assumed: the counter has to stay still for a quiet window,
//! polled within a deadline. A daemon that spins never gets there.

use std::path::Path;
use std::time::{Duration, Instant};

use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, poll, tag};
use serde_json::json;

/// What the daemon logs each time it applies a changed config file.
const RELOADED: &str = "config reloaded";
/// What it logs when it refuses one.
const NOT_APPLIED: &str = "config not applied";
/// How long the CPU counter must stay still to call the daemon idle.
const QUIET: Duration = Duration::from_millis(300);
/// How long a daemon gets to go idle. A spinning one burns about this much CPU meanwhile.
const IDLE_WITHIN: Duration = Duration::from_secs(5);
/// CPU the daemon may spend over 100 reads of its config and the wait to go idle.
const READS_CPU_BOUND: Duration = Duration::from_secs(1);

/// User + system CPU time the process has used so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the daemon's /proc stat");
    // Fields after the parenthesised command name (which may hold spaces) start at field 3;
    // utime and stime are fields 14 and 15.
    let (_, rest) = stat.rsplit_once(')').expect("a stat line");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// Waits until the daemon's CPU time stays still for [`QUIET`]; its CPU time then, or
/// `None` when it was still rising after [`IDLE_WITHIN`].
fn wait_until_idle(pid: u32) -> Option<Duration> {
    let mut last = (cpu_time(pid), Instant::now());
    poll(IDLE_WITHIN, || {
        let now = cpu_time(pid);
        if now != last.0 {
            last = (now, Instant::now());
        }
        (last.1.elapsed() >= QUIET).then_some(now)
    })
}

fn reloads(daemon: &Daemon) -> usize {
    daemon.stderr().matches(RELOADED).count()
}

fn whoami(daemon: &Daemon, server: &str) -> Whoami {
    Whoami::of(&Modern::mcpx_call(server, "whoami", json!({})).send(daemon.url()))
}

#[test]
fn reading_the_config_file_neither_reloads_it_nor_spins_the_daemon_and_a_save_applies_once() {
    let tag = tag();
    let first = config(&[("a", fakemcp("global", &tag, &[]))]);
    let daemon = Daemon::start(&first);
    let pid = daemon.pid();
    whoami(&daemon, "a");
    let before = wait_until_idle(pid).expect("the daemon never went idle after its first call");
    let reloads_before = reloads(&daemon);

    for _ in 0..100 {
        std::fs::read(daemon.config_path()).expect("read the config file");
    }
    let after = wait_until_idle(pid).unwrap_or_else(|| {
        panic!(
            "the daemon's CPU time kept rising for {IDLE_WITHIN:?} after its config file was read \
             ({:?} used): reading the file made it reload in a loop",
            cpu_time(pid) - before
        )
    });
    assert!(
        after - before < READS_CPU_BOUND,
        "100 reads of the config file cost the daemon {:?} of CPU",
        after - before
    );
    assert_eq!(reloads(&daemon), reloads_before, "reading the config file reloaded it:\n{}", daemon.stderr());

    // Writing the same bytes in place (truncate, then write) is no change, and the
    // truncated file is never read half-written.
    let same = std::fs::read(daemon.config_path()).expect("read the config file");
    std::fs::write(daemon.config_path(), &same).expect("write the config file in place");
    let mut second = first.clone();
    second["mcpServers"]["b"] = fakemcp("global", &tag, &[]);
    assert!(daemon.rewrite_config(&second), "a real change was not reloaded:\n{}", daemon.stderr());
    assert_eq!(whoami(&daemon, "b").calls, 1, "the server the save added is not served");
    assert_eq!(reloads(&daemon), reloads_before + 1, "one save, one reload:\n{}", daemon.stderr());
    assert!(!daemon.stderr().contains(NOT_APPLIED), "a valid file was refused:\n{}", daemon.stderr());

    let settled = wait_until_idle(pid).expect("the daemon kept spinning after a save");
    assert_eq!(reloads(&daemon), reloads_before + 1, "one save, one reload:\n{}", daemon.stderr());
    assert!(settled - after < READS_CPU_BOUND, "a save and one call cost the daemon {:?} of CPU", settled - after);
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the daemon died");
}
