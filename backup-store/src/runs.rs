//! A set of segment numbers kept as runs of consecutive numbers: an archive of 30 days holds
//! half a million segments, and a set of their names would cost the continuity check tens of
//! MiB where the runs cost a few bytes per hole.

use std::collections::BTreeMap;

/// Segment numbers as inclusive runs, `first → last`; runs never touch or overlap.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Runs(BTreeMap<u64, u64>);

impl Runs {
    pub fn insert(&mut self, n: u64) {
        let before = self.0.range(..=n).next_back().map(|(a, b)| (*a, *b));
        let after_start = n
            .checked_add(1)
            .and_then(|m| self.0.get(&m).map(|end| (m, *end)));
        match (before, after_start) {
            (Some((_, last)), _) if last >= n => {}
            (Some((first, last)), Some((next, next_last))) if last + 1 == n => {
                self.0.remove(&next);
                self.0.insert(first, next_last);
            }
            (Some((first, last)), None) if last + 1 == n => {
                self.0.insert(first, n);
            }
            (_, Some((next, next_last))) => {
                self.0.remove(&next);
                self.0.insert(n, next_last);
            }
            _ => {
                self.0.insert(n, n);
            }
        }
    }

    pub fn contains(&self, n: u64) -> bool {
        (self.0.range(..=n).next_back()).is_some_and(|(_, last)| *last >= n)
    }

    /// The highest number held.
    pub fn last(&self) -> Option<u64> {
        self.0.values().next_back().copied()
    }

    /// The lowest number held that is `>= n`.
    pub fn first_from(&self, n: u64) -> Option<u64> {
        if self.contains(n) {
            return Some(n);
        }
        self.0.range(n..).next().map(|(first, _)| *first)
    }

    /// The highest number held that is `<= n`.
    pub fn last_until(&self, n: u64) -> Option<u64> {
        let (_, last) = self.0.range(..=n).next_back()?;
        Some((*last).min(n))
    }

    /// How many numbers in `first..=last` are held.
    pub fn count_within(&self, first: u64, last: u64) -> u64 {
        let from = self
            .0
            .range(..=first)
            .next_back()
            .map_or(first, |(a, _)| *a);
        (self.0.range(from..=last))
            .map(|(a, b)| {
                let (a, b) = ((*a).max(first), (*b).min(last));
                if b >= a { b - a + 1 } else { 0 }
            })
            .sum()
    }

    /// The stretches of `first..=last` not held, in order (inclusive).
    pub fn holes(&self, first: u64, last: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = first;
        let from = self
            .0
            .range(..=first)
            .next_back()
            .map_or(first, |(a, _)| *a);
        for (a, b) in self.0.range(from..=last) {
            if *b < at {
                continue;
            }
            if *a > at {
                out.push((at, a - 1));
            }
            at = b.saturating_add(1);
            if at > last {
                return out;
            }
        }
        if at <= last {
            out.push((at, last));
        }
        out
    }

    /// How many runs (the memory the set takes).
    pub fn runs(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Runs;

    fn of(numbers: &[u64]) -> Runs {
        let mut runs = Runs::default();
        for n in numbers {
            runs.insert(*n);
        }
        runs
    }

    #[test]
    fn consecutive_numbers_in_any_order_make_one_run() {
        let runs = of(&[5, 3, 4, 7, 6, 3, 2]);
        assert_eq!(runs.runs(), 1);
        assert!((2..=7).all(|n| runs.contains(n)));
        assert!(!runs.contains(1) && !runs.contains(8));
        assert_eq!(runs.last(), Some(7));
    }

    #[test]
    fn holes_split_runs_and_counts_see_them() {
        let runs = of(&[1, 2, 3, 6, 7, 10]);
        assert_eq!(runs.runs(), 3);
        assert_eq!(runs.count_within(2, 9), 4);
        assert_eq!(runs.count_within(0, 100), 6);
        assert_eq!(runs.count_within(4, 5), 0);
        assert_eq!(runs.first_from(4), Some(6));
        assert_eq!(runs.first_from(7), Some(7));
        assert_eq!(runs.first_from(11), None);
        assert_eq!(runs.last_until(9), Some(7));
        assert_eq!(runs.last_until(2), Some(2));
        assert_eq!(runs.last_until(0), None);
        assert_eq!(runs.holes(0, 12), [(0, 0), (4, 5), (8, 9), (11, 12)]);
        assert_eq!(runs.holes(2, 7), [(4, 5)]);
        assert_eq!(runs.holes(6, 7), []);
        assert_eq!(Runs::default().holes(3, 4), [(3, 4)]);
    }
}
