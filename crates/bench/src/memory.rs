//! Memory of a process under test: its high-water resident set size (`VmHWM` in
//! `/proc/<pid>/status`), which read just before the process is stopped covers the whole
//! run, warm-up included; and its resident set now (`VmRSS`), for before/after figures.

use std::path::Path;

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
    fn this_process_has_a_peak() {
        assert!(peak_rss_kib(std::process::id()).is_some_and(|kib| kib > 0));
    }
}
