//! Parsing of retention ages such as `30d`, `12h`, `90m`, `2w`.

use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid duration {0:?}: expected a positive number followed by s, m, h, d or w (e.g. 30d)"
)]
pub struct DurationError(pub String);

pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = || DurationError(input.to_string());
    let s = input.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
    let (number, unit) = s.split_at(split);
    let n: u64 = number.parse().map_err(|_| err())?;
    let secs_per_unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(err()),
    };
    if n == 0 {
        return Err(err());
    }
    n.checked_mul(secs_per_unit)
        .map(Duration::from_secs)
        .ok_or_else(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "d",
            "30",
            "0d",
            "-1d",
            "1.5d",
            "30x",
            "30 d",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
