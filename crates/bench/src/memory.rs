//! Memory of a process under test: its high-water resident set size (`VmHWM` in
//! `/proc/<pid>/status`), which read just before the process is stopped covers the whole
//! run, warm-up included; and its resident set now (`VmRSS`), for before/after figures.
//! Also the CPU time a process has used, so a run can say what a call costs in CPU: a
//! figure that, unlike throughput, a busy machine hardly moves.

use std::path::Path;
use std::time::Duration;

/// The CPU time (user and system, all threads) `pid` has used so far, or None when it is
/// gone. The kernel counts it in clock ticks (10 ms at the usual 100 Hz), so it is only
/// worth reading around work that takes seconds.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let ticks = parse_cpu_ticks(&std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).ok()?)?;
    let per_second = rustix::param::clock_ticks_per_second();
    (per_second > 0).then(|| Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// utime + stime from a `/proc/<pid>/stat` line: fields 14 and 15, counted after the
/// command name, which may hold spaces and parentheses.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let mut after_comm = stat[stat.rfind(')')? + 1..].split_whitespace();
    let utime: u64 = after_comm.nth(11)?.parse().ok()?;
    let stime: u64 = after_comm.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The peak resident set of `pid` in KiB, or None when the process is gone or the kernel
/// does not report it.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    parse_hwm(&std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status")).ok()?)
}

/// The resident set of `pid` right now, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    parse_field(&std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status")).ok()?, "VmRSS:")
}

fn parse_hwm(status: &str) -> Option<u64> {
    parse_field(status, "VmHWM:")
}

fn parse_field(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(field))?;
    // "VmHWM:	    2048 kB": the kernel always reports kB (KiB).
    line[field.len()..].trim().strip_suffix("kB")?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_high_water_mark_in_kib() {
        let status = "Name:\tfakemcp\nVmPeak:\t  9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1900 kB\n";
        assert_eq!(parse_hwm(status), Some(2048));
        assert_eq!(parse_field(status, "VmRSS:"), Some(1900));
    }

    #[test]
    fn a_kernel_thread_without_memory_has_no_figure() {
        assert_eq!(parse_hwm("Name:\tkthreadd\nState:\tS (sleeping)\n"), None);
    }

    #[test]
    fn reads_user_and_system_ticks_past_an_odd_command_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 3 0 1000 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(280));
        assert_eq!(parse_cpu_ticks("42 (gone"), None);
    }

    #[test]
    fn this_process_has_a_peak() {
        assert!(peak_rss_kib(std::process::id()).is_some_and(|kib| kib > 0));
    }
}
