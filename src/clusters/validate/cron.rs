//! The CronJob API's schedule rule, mirrored exactly: Kubernetes validates `spec.schedule` with
//! `cron.ParseStandard` of robfig/cron v3 and refuses any `TZ`. A schedule accepted here is
//! accepted by the CronJob API, and the other way round — including robfig's quirks (`?` as
//! `*`, `+5`, empty list items, `@every <Go duration>`), because Tusk passes the string on as is.

/// Why robfig/cron (as Kubernetes calls it) refuses a schedule.
pub fn check(schedule: &str) -> Result<(), String> {
    if schedule.contains("TZ") {
        return Err("TZ and CRON_TZ are not allowed in a CronJob schedule".to_owned());
    }
    if schedule.is_empty() {
        return Err("it is empty".to_owned());
    }
    if schedule.starts_with('@') {
        return descriptor(schedule);
    }
    // Go's strings.Fields splits on Unicode White_Space, as split_whitespace does.
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!("expected exactly 5 fields, found {}", fields.len()));
    }
    for (field, bounds) in fields.into_iter().zip(&FIELDS) {
        // FieldsFunc: empty items of a comma-separated list are skipped.
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            range(expr, bounds)?;
        }
    }
    Ok(())
}

struct Bounds {
    what: &'static str,
    min: u64,
    max: u64,
    names: &'static [&'static str],
}

const MONTHS: &[&str] = &[
    "", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

const FIELDS: [Bounds; 5] = [
    Bounds {
        what: "minute",
        min: 0,
        max: 59,
        names: &[],
    },
    Bounds {
        what: "hour",
        min: 0,
        max: 23,
        names: &[],
    },
    Bounds {
        what: "day of month",
        min: 1,
        max: 31,
        names: &[],
    },
    Bounds {
        what: "month",
        min: 1,
        max: 12,
        names: MONTHS,
    },
    Bounds {
        what: "day of week",
        min: 0,
        max: 6,
        names: WEEKDAYS,
    },
];

/// robfig's getRange: `*`/`?`, `n`, `n-m`, each optionally `/step`.
fn range(expr: &str, b: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if matches!(low_and_high[0], "*" | "?") {
        // robfig ignores anything after `*-`.
        (b.min, b.max)
    } else {
        let start = int_or_name(low_and_high[0], b)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], b)?),
            _ => return Err(format!("too many hyphens in {expr:?}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = non_negative_int(range_and_step[1])?;
            // `n/step` means `n-max/step`.
            if low_and_high.len() == 1 {
                end = b.max;
            }
            step
        }
        _ => return Err(format!("too many slashes in {expr:?}")),
    };
    let what = b.what;
    if start < b.min || end > b.max {
        return Err(format!("{what} {expr:?} is outside {}-{}", b.min, b.max));
    }
    if start > end {
        return Err(format!("{what} range {expr:?} begins after it ends"));
    }
    if step == 0 {
        return Err(format!("{what} step in {expr:?} must be positive"));
    }
    Ok(())
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    match b.names.iter().position(|n| !n.is_empty() && *n == lower) {
        Some(index) => Ok(index as u64),
        None => non_negative_int(expr),
    }
}

/// Go's strconv.Atoi (optional sign, decimal, 64-bit) followed by robfig's `num < 0` check.
fn non_negative_int(expr: &str) -> Result<u64, String> {
    let invalid = || format!("{expr:?} is not a number");
    let (negative, digits) = match expr.as_bytes().first() {
        Some(b'+') => (false, &expr[1..]),
        Some(b'-') => (true, &expr[1..]),
        _ => (false, expr),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(invalid());
    }
    let value: u64 = digits.parse().map_err(|_| invalid())?;
    match (negative, value) {
        (false, v) if v <= i64::MAX as u64 => Ok(v),
        (true, 0) => Ok(0),
        (true, _) => Err(format!("{expr:?} is negative")),
        (false, _) => Err(invalid()),
    }
}

fn descriptor(schedule: &str) -> Result<(), String> {
    const MACROS: &[&str] = &[
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
    ];
    if MACROS.contains(&schedule) {
        return Ok(());
    }
    match schedule.strip_prefix("@every ") {
        Some(duration) => go_duration(duration)
            .map_err(|()| format!("{duration:?} is not a Go duration such as 1h30m")),
        None => Err("unknown @ macro".to_owned()),
    }
}

/// Go's time.ParseDuration: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` or `0`, within ±2^63 ns.
fn go_duration(text: &str) -> Result<(), ()> {
    const LIMIT: u64 = 1 << 63;
    let mut s = text;
    let negative = s.starts_with('-');
    if s.starts_with(['-', '+']) {
        s = &s[1..];
    }
    if s == "0" {
        return Ok(());
    }
    if s.is_empty() {
        return Err(());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(());
        }
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut value: u64 = 0;
        for digit in s[..int_len].bytes() {
            value = value.checked_mul(10).ok_or(())? + u64::from(digit - b'0');
            if value > LIMIT {
                return Err(());
            }
        }
        s = &s[int_len..];
        let (mut fraction, mut scale, mut fraction_len) = (0u64, 1f64, 0);
        if let Some(rest) = s.strip_prefix('.') {
            fraction_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            for digit in rest[..fraction_len].bytes() {
                // Go stops accumulating digits that would overflow; they cannot matter.
                if let Some(next) = fraction.checked_mul(10).filter(|f| *f < LIMIT) {
                    fraction = next + u64::from(digit - b'0');
                    scale *= 10.0;
                }
            }
            s = &rest[fraction_len..];
        }
        if int_len == 0 && fraction_len == 0 {
            return Err(());
        }
        let unit_len = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        let unit: u64 = match &s[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(()),
        };
        s = &s[unit_len..];
        if value > LIMIT / unit {
            return Err(());
        }
        value *= unit;
        if fraction > 0 {
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(());
            }
        }
        total = total.checked_add(value).filter(|t| *t <= LIMIT).ok_or(())?;
    }
    if !negative && total > LIMIT - 1 {
        return Err(());
    }
    Ok(())
}
