//! Memory of a process under test: its high-water resident set size (`VmHWM` in
//! `/proc/<pid>/status`), which read just before the process is stopped covers the whole
//! run, warm-up included; and its resident set now (`VmRSS`), for before/after figures.
//! Also the CPU time a process has used, so a run can say what a call costs in CPU: a
//! figure that, unlike throughput, a busy machine hardly moves.

use std::path::Path;
use std::time::Duration;

/// The CPU time (user and system, of all its threads, those that have ended too) `pid` has
/// used so far, or None when it is gone. Read from the process's CPU-time clock, to the
/// nanosecond: `/proc/<pid>/stat` counts it in clock ticks (10 ms at the usual 100 Hz),
/// too coarse for a turn of a fraction of a second.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: both calls only write the values they are given a pointer to, which live
    // for the call.
    let now = unsafe {
        if libc::clock_getcpuclockid(pid, &mut clock) != 0 {
            return None;
        }
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        (libc::clock_gettime(clock, &mut now) == 0).then_some(now)
    }?;
    Some(Duration::new(u64::try_from(now.tv_sec).ok()?, u32::try_from(now.tv_nsec).ok()?))
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
    fn reads_a_child_s_cpu_time_and_none_once_it_is_gone() {
        // A child that spins for about 30 ms of CPU, then waits to be read.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; read _"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh starts");
        let pid = child.id();
        let mut used = Duration::ZERO;
        // Wait until it has used some CPU: the loop, then the read that blocks.
        while used < Duration::from_millis(5) {
            std::thread::yield_now();
            used = cpu_time(pid).expect("the child is running");
        }
        assert!(cpu_time(pid).expect("the child is running") >= used);
        drop(child.stdin.take());
        child.wait().expect("the child ends");
        assert_eq!(cpu_time(pid), None, "a reaped process has no CPU clock");
    }

    #[test]
    fn this_process_has_a_peak() {
        assert!(peak_rss_kib(std::process::id()).is_some_and(|kib| kib > 0));
    }
}
