//! Human-readable ages and sizes, as kubectl prints them.

use k8s_openapi::jiff::Timestamp;

/// `42s`, `5m`, `3h`, `2d` — the largest whole unit, like kubectl's AGE column.
pub fn age(since: Timestamp, now: Timestamp) -> String {
    let seconds = now.as_second().saturating_sub(since.as_second()).max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// `in 42s`, `in 5m`…: how far ahead `at` is.
pub fn until(at: Timestamp, now: Timestamp) -> String {
    format!("in {}", age(now, at))
}

/// Bytes in binary units with one decimal: `512 B`, `1.5 KiB`, `3.2 MiB`.
pub fn size(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn ages_use_the_largest_whole_unit() {
        let now = at("2026-11-24T12:00:00Z");
        assert_eq!(age(at("2026-11-24T11:59:15Z"), now), "45s");
        assert_eq!(age(at("2026-11-24T11:30:00Z"), now), "30m");
        assert_eq!(age(at("2026-11-24T02:00:00Z"), now), "10h");
        assert_eq!(age(at("2026-11-20T12:00:00Z"), now), "4d");
        assert_eq!(until(at("2026-11-25T02:00:00Z"), now), "in 14h");
    }

    #[test]
    fn sizes_are_binary_units() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 * 1024 * 1024 + 200 * 1024), "3.2 MiB");
    }
}
