//! The API server's ClusterIP allocations during a burst, from its own log.
//!
//! kube-apiserver allocates a dynamic ClusterIP under one lock (`MetaAllocator`), held across the
//! create of the address's `IPAddress` object and a count of every address allocated so far; it
//! logs `"allocated clusterIPs"` once each Service is stored. The gaps between those lines show
//! how fast the one lock lets Services through under the benchmark's load: every operator whose
//! clusters have ClusterIP Services (Tusk's `-rw`, `-ro`, `-r`) waits on it.

use std::fmt;
use std::path::Path;

use crate::{Context, Result};

/// How the allocations were spaced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Allocations {
    pub count: usize,
    /// First to last, in seconds.
    pub span: f64,
    /// Gaps between consecutive allocations, in milliseconds: 10th, 50th, 90th percentile.
    pub gaps_ms: [f64; 3],
}

impl Allocations {
    /// Reads kube-apiserver's log at `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).context(path.display())?;
        Ok(Self::of(&text))
    }

    /// From the text of kube-apiserver's log (klog: `I1206 05:24:46.569565 …`).
    pub fn of(log: &str) -> Self {
        let times: Vec<f64> = log
            .lines()
            .filter(|line| line.contains("\"allocated clusterIPs\""))
            .filter_map(klog_seconds)
            .collect();
        let mut gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) * 1e3).collect();
        gaps.sort_by(f64::total_cmp);
        let at = |q: f64| {
            gaps.get(((gaps.len() as f64 * q) as usize).min(gaps.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0.0)
        };
        Self {
            count: times.len(),
            span: match (times.first(), times.last()) {
                (Some(first), Some(last)) => last - first,
                _ => 0.0,
            },
            gaps_ms: [at(0.1), at(0.5), at(0.9)],
        }
    }

    /// Allocations a second over the span.
    pub fn rate(&self) -> f64 {
        if self.span > 0.0 {
            (self.count.saturating_sub(1)) as f64 / self.span
        } else {
            0.0
        }
    }
}

impl fmt::Display for Allocations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [p10, p50, p90] = self.gaps_ms;
        write!(
            f,
            "{} in {:.1} s, {:.1} a second; gaps p10 {p10:.0} / p50 {p50:.0} / p90 {p90:.0} ms",
            self.count,
            self.span,
            self.rate()
        )
    }
}

/// Seconds since the start of the month of a klog line (`Lmmdd hh:mm:ss.uuuuuu`): enough to
/// order a run's lines and measure the gaps between them.
fn klog_seconds(line: &str) -> Option<f64> {
    let mut fields = line.split_whitespace();
    let day: f64 = fields.next()?.get(3..5)?.parse().ok()?;
    let mut clock = fields.next()?.split(':');
    let hours: f64 = clock.next()?.parse().ok()?;
    let minutes: f64 = clock.next()?.parse().ok()?;
    let seconds: f64 = clock.next()?.parse().ok()?;
    Some(((day * 24.0 + hours) * 60.0 + minutes) * 60.0 + seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"I1206 05:22:26.464712   25976 server.go:153] "Golang settings" GOGC=""
I1206 23:59:59.900000   25976 alloc.go:329] "allocated clusterIPs" service="scale-0/pg-1-rw" clusterIPs={"IPv4":"10.96.0.1"}
I1206 23:59:59.950000   25976 alloc.go:329] "allocated clusterIPs" service="scale-0/pg-1-ro" clusterIPs={"IPv4":"10.96.0.2"}
I1207 00:00:00.050000   25976 alloc.go:329] "allocated clusterIPs" service="scale-0/pg-1-r" clusterIPs={"IPv4":"10.96.0.3"}
"#;

    #[test]
    fn allocations_are_counted_and_spaced_across_midnight() {
        let found = Allocations::of(LOG);
        assert_eq!(found.count, 3);
        assert!((found.span - 0.15).abs() < 1e-6, "{found:?}");
        assert!((found.gaps_ms[0] - 50.0).abs() < 1e-6, "{found:?}");
        assert!((found.gaps_ms[2] - 100.0).abs() < 1e-6, "{found:?}");
        assert!((found.rate() - 2.0 / 0.15).abs() < 1e-6);
    }

    #[test]
    fn a_log_without_allocations_says_none() {
        let found = Allocations::of("I1206 05:22:26.464712 1 x.go:1] \"other\"\n");
        assert_eq!(found, Allocations::default());
        assert_eq!(found.rate(), 0.0);
    }
}
