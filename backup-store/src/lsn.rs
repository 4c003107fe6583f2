//! WAL positions, PostgreSQL's `X/Y`: shared by the WAL archive (feature `wal`) and retention by
//! recovery window, which the operator runs without it.

use std::fmt;

/// A WAL position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lsn(pub u64);

#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a WAL position (X/Y)")]
pub struct InvalidLsn(pub String);

impl Lsn {
    /// Parses `X/Y` (two hexadecimal halves of at most eight digits).
    pub fn parse(text: &str) -> Result<Self, InvalidLsn> {
        let invalid = || InvalidLsn(text.to_owned());
        let (high, low) = text.split_once('/').ok_or_else(invalid)?;
        let half = |h: &str| {
            (!h.is_empty() && h.len() <= 8)
                .then(|| u32::from_str_radix(h, 16).ok())
                .flatten()
                .ok_or_else(invalid)
        };
        Ok(Self((u64::from(half(high)?) << 32) | u64::from(half(low)?)))
    }

    /// Where the segment a WAL file name starts with (`TTTTTTTTXXXXXXXXSSSSSSSS`, any suffix:
    /// `.partial`, `.00000028.backup`) begins, for segments of `segment_size` bytes. `None` for
    /// anything else (a timeline history file).
    pub fn of_segment(name: &str, segment_size: u64) -> Option<Self> {
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        let segment = name.get(..24)?;
        if !segment.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let (xlogid, number) = (hex(&segment[8..16])?, hex(&segment[16..24])?);
        let start = number.checked_mul(segment_size)?;
        (start < 0x1_0000_0000).then_some(Self((xlogid << 32) | start))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_parse_and_print_as_postgresql_writes_them() {
        let lsn = Lsn::parse("1A/2000028").unwrap();
        assert_eq!(lsn.0, (0x1A << 32) | 0x200_0028);
        assert_eq!(lsn.to_string(), "1A/2000028");
        for bad in ["", "0", "/1", "1/", "g/1", "123456789/0", "0/1/2"] {
            assert!(Lsn::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_segment_name_starts_where_its_number_says() {
        const MIB16: u64 = 16 << 20;
        let at = |name| Lsn::of_segment(name, MIB16).map(|l| l.to_string());
        assert_eq!(at("000000020000000100000003").as_deref(), Some("1/3000000"));
        assert_eq!(
            at("0000000200000001000000FF.partial").as_deref(),
            Some("1/FF000000")
        );
        assert_eq!(
            at("000000010000000000000002.00000028.backup").as_deref(),
            Some("0/2000000")
        );
        // 64 MiB segments: 64 per 4 GiB, so 0x3F is the last.
        let big = Lsn::of_segment("00000001000000010000003F", 64 << 20).unwrap();
        assert_eq!(big.to_string(), "1/FC000000");
        assert_eq!(Lsn::of_segment("000000010000000100000040", 64 << 20), None);
        for other in ["00000002.history", "short", "zz0000010000000000000002"] {
            assert_eq!(at(other), None, "{other}");
        }
    }
}
