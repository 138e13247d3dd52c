//! Peak memory of a process under test: its high-water resident set size (`VmHWM` in
//! `/proc/<pid>/status`). Read just before the process is stopped, it covers the whole
//! run, warm-up included.

use std::path::Path;

/// The peak resident set of `pid` in KiB, or None when the process is gone or the kernel
/// does not report it.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    parse_hwm(&std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status")).ok()?)
}

fn parse_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    // "VmHWM:	    2048 kB": the kernel always reports kB (KiB).
    line["VmHWM:".len()..].trim().strip_suffix("kB")?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_high_water_mark_in_kib() {
        let status = "Name:\tfakemcp\nVmPeak:\t  9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1900 kB\n";
        assert_eq!(parse_hwm(status), Some(2048));
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
