//! Where the machine's cores went: the whole machine's busy time (/proc/stat) and each process
//! of the local control plane (pids/*.pid of e2e/local/up.sh, the operator's included), read
//! twice and subtracted. A burst is bounded either by the cores (the machine busy throughout)
//! or by waiting somewhere (cores idle): this tells which, and whose work filled them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::census::Progress;
use super::process;
use crate::{Context, Result, fail};

/// One reading of the counters.
#[derive(Debug, Clone)]
pub struct Reading {
    at: Instant,
    /// The machine's busy and total CPU seconds over all cores since boot.
    busy: f64,
    total: f64,
    /// CPU seconds of each process of the stand, by its pid file's name.
    processes: Vec<(String, f64)>,
}

/// What happened between two readings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Split {
    pub wall_seconds: f64,
    /// The share of every core's time that was busy, 0–1.
    pub busy: f64,
    /// CPU seconds by process, most first.
    pub processes: Vec<(String, f64)>,
}

impl Reading {
    /// Reads /proc/stat and every process with a pid file in `dir`/pids (one that has exited
    /// is left out).
    pub fn now(dir: &Path) -> Result<Self> {
        let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        let (busy, total) = machine_seconds(&stat, process::clock_ticks())?;
        let pids = dir.join("pids");
        let mut processes = Vec::new();
        for entry in std::fs::read_dir(&pids).context(pids.display())? {
            let path = entry.context(pids.display())?.path();
            let (Some(name), Some("pid")) = (
                path.file_stem().and_then(|s| s.to_str()),
                path.extension().and_then(|s| s.to_str()),
            ) else {
                continue;
            };
            let pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok());
            if let Some(usage) = pid.and_then(|pid| process::usage(pid).ok()) {
                processes.push((name.to_owned(), usage.cpu_seconds));
            }
        }
        Ok(Reading {
            at: Instant::now(),
            busy,
            total,
            processes,
        })
    }

    /// What happened from `earlier` to this reading. A process restarted in between (the
    /// operator) counts from zero, so its figure is its time since the restart.
    pub fn since(&self, earlier: &Reading) -> Split {
        let total = self.total - earlier.total;
        let mut processes: Vec<(String, f64)> = self
            .processes
            .iter()
            .map(|(name, now)| {
                let before = earlier
                    .processes
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0.0, |(_, s)| *s);
                let used = if now >= &before { now - before } else { *now };
                (name.clone(), used)
            })
            .collect();
        processes.sort_by(|a, b| b.1.total_cmp(&a.1));
        Split {
            wall_seconds: self.at.duration_since(earlier.at).as_secs_f64(),
            busy: if total > 0.0 {
                (self.busy - earlier.busy) / total
            } else {
                0.0
            },
            processes,
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "machine {:.0} % busy over {:.0} s; CPU s:",
            self.busy * 100.0,
            self.wall_seconds
        )?;
        for (i, (name, seconds)) in self.processes.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(f, "{sep}{name} {seconds:.1}")?;
        }
        Ok(())
    }
}

/// Busy and total seconds of all cores from /proc/stat's first line (`cpu user nice system
/// idle iowait irq softirq steal …`, in clock ticks): idle and iowait are not busy.
fn machine_seconds(stat: &str, ticks_per_second: f64) -> Result<(f64, f64)> {
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        fail!("/proc/stat has no cpu line");
    };
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|t| t.parse::<f64>().context(format!("/proc/stat field {t:?}")))
        .collect::<Result<_>>()?;
    if ticks.len() < 8 {
        fail!("/proc/stat's cpu line has {} fields: {line}", ticks.len());
    }
    let total: f64 = ticks.iter().sum();
    let idle = ticks[3] + ticks[4];
    Ok(((total - idle) / ticks_per_second, total / ticks_per_second))
}

/// The counts, where the cores went since the last line, and the operator's memory.
pub fn progress(dir: PathBuf) -> Progress {
    let last = std::sync::Mutex::new(Reading::now(&dir).ok());
    Box::new(move |counts| {
        let now = Reading::now(&dir).ok();
        let mut last = last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let cores = match (&now, last.as_ref()) {
            (Some(now), Some(before)) => now.since(before).to_string(),
            _ => "cores not read".into(),
        };
        *last = now;
        let rss = std::fs::read_to_string(dir.join("pids/operator.pid"))
            .ok()
            .and_then(|pid| process::usage(pid.trim().parse().ok()?).ok())
            .map_or_else(|| "-".into(), |u| format!("{} KiB", u.rss_kib));
        format!("{counts}; {cores}; operator RSS {rss}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_and_iowait_are_not_busy() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n";
        assert_eq!(machine_seconds(stat, 100.0).unwrap(), (1.5, 10.0));
        assert!(machine_seconds("intr 1 2 3\n", 100.0).is_err());
    }

    #[test]
    fn a_split_orders_processes_and_counts_a_restarted_one_from_zero() {
        let at = Instant::now();
        let earlier = Reading {
            at,
            busy: 10.0,
            total: 100.0,
            processes: vec![("etcd".into(), 5.0), ("operator".into(), 30.0)],
        };
        let later = Reading {
            at: at + std::time::Duration::from_secs(10),
            busy: 28.0,
            total: 120.0,
            processes: vec![("etcd".into(), 7.0), ("operator".into(), 4.0)],
        };
        let split = later.since(&earlier);
        assert_eq!(split.busy, 0.9);
        assert_eq!(
            split.processes,
            vec![("operator".into(), 4.0), ("etcd".into(), 2.0)]
        );
        assert_eq!(
            split.to_string(),
            "machine 90 % busy over 10 s; CPU s: operator 4.0, etcd 2.0"
        );
    }
}
