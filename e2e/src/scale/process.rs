//! What a process on this machine uses, from /proc: resident memory now and at its peak, and
//! CPU time.

use crate::{Context, Result, fail};

/// One reading of a process's usage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// VmRSS: resident memory now, in KiB.
    pub rss_kib: u64,
    /// VmHWM: the peak of resident memory since the process started, in KiB.
    pub peak_kib: u64,
    /// RssAnon: the part of VmRSS that is heap and stacks (the rest is mapped files, mostly
    /// the binary's own code), in KiB.
    pub anon_kib: u64,
    /// User plus system CPU time since the process started, in seconds.
    pub cpu_seconds: f64,
}

/// Reads the usage of process `pid`.
pub fn usage(pid: u32) -> Result<Usage> {
    let read = |file: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .context(format!("reading /proc/{pid}/{file}"))
    };
    let (rss_kib, peak_kib, anon_kib) = memory(&read("status")?)?;
    Ok(Usage {
        rss_kib,
        peak_kib,
        anon_kib,
        cpu_seconds: cpu_seconds(&read("stat")?, clock_ticks())?,
    })
}

/// Clock ticks per second of /proc/PID/stat's times: 100 on every Linux this runs on (the
/// kernel's USER_HZ); `getconf` says otherwise where it is not.
pub(super) fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

/// VmRSS, VmHWM and RssAnon (KiB) from /proc/PID/status.
fn memory(status: &str) -> Result<(u64, u64, u64)> {
    let field = |name: &str| -> Result<u64> {
        let Some(line) = status.lines().find(|l| l.starts_with(name)) else {
            fail!("/proc status has no {name}");
        };
        let kib = line[name.len()..].trim().trim_end_matches("kB").trim();
        kib.parse().context(format!("{name} {kib:?}"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?, field("RssAnon:")?))
}

/// utime + stime (fields 14 and 15) of /proc/PID/stat, in seconds. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted after its last ')'.
fn cpu_seconds(stat: &str, ticks_per_second: f64) -> Result<f64> {
    let Some((_, after_name)) = stat.rsplit_once(')') else {
        fail!("/proc stat without a command name: {stat:.80}");
    };
    // after_name starts at field 3 (state): utime is field 14, the 12th from here.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| -> Result<f64> {
        let Some(value) = fields.get(i) else {
            fail!("/proc stat has {} fields after the name", fields.len());
        };
        value
            .parse::<f64>()
            .context(format!("stat field {value:?}"))
    };
    Ok((ticks(11)? + ticks(12)?) / ticks_per_second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_reads_rss_peak_and_anonymous() {
        let status = "Name:\ttusk\nVmPeak:\t  900000 kB\nVmHWM:\t   40960 kB\n\
                      VmRSS:\t   32768 kB\nRssAnon:\t   20480 kB\nRssFile:\t   12288 kB\n";
        assert_eq!(memory(status).unwrap(), (32768, 40960, 20480));
        assert!(memory("Name:\ttusk\n").is_err());
    }

    #[test]
    fn cpu_time_counts_fields_after_the_command_name() {
        // A name with a space and a ')' must not shift the fields.
        let stat = "4242 (tusk (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 8 0";
        assert_eq!(cpu_seconds(stat, 100.0).unwrap(), 4.0);
        assert!(cpu_seconds("4242 tusk S", 100.0).is_err());
    }
}
