//! The newest commit a WAL segment holds, read from its records as PostgreSQL wrote them.
//!
//! A recovery to a time stops only at a commit or abort record stamped after that time
//! (`recoveryStopsBefore`): with none in the WAL it replays to the end and fails ("recovery
//! ended before configured recovery target was reached"), after the whole download. So
//! whether an archive reaches a time is decided by the commit times its WAL holds, not by when
//! its files were uploaded (a file uploaded after the target may hold only commits before it).
//!
//! The format read here (`access/xlogrecord.h`, `access/xlog_internal.h`, `access/xact.h`) has
//! been stable since PostgreSQL 9.5: pages of `xlp_xlog_blcksz` bytes, each with a header (a
//! long one first in a segment), records 8-byte aligned and free to cross pages. A record is
//! trusted only while its page addresses and its `xl_prev` link chain from the segment's
//! start: what follows the end of valid WAL (zeros after a switch, a recycled file's old
//! bytes) ends the scan.

use jiff::Timestamp;

/// `XLogPageHeaderData` padded to 8 bytes, and the long form a segment's first page carries.
const SHORT_HEADER: usize = 24;
const LONG_HEADER: usize = 40;
const PAGE_MAGIC_MIN: u16 = 0xD000;
const XLP_FIRST_IS_CONTRECORD: u16 = 0x0001;
const XLP_LONG_HEADER: u16 = 0x0002;
/// `SizeOfXLogRecord`.
const RECORD_HEADER: usize = 24;
const RM_XACT_ID: u8 = 1;
const XLOG_XACT_OPMASK: u8 = 0x70;
/// Commit, abort, commit prepared, abort prepared: the records a time target stops at.
const STAMPED_XACT: [u8; 4] = [0x00, 0x20, 0x30, 0x40];
const BLOCK_ID_DATA_SHORT: u8 = 255;
const BLOCK_ID_DATA_LONG: u8 = 254;
const BLOCK_ID_ORIGIN: u8 = 253;
const BLOCK_ID_TOPLEVEL_XID: u8 = 252;
/// Enough of a commit record for its time: the header, the origin, top-level xid and data
/// headers, `xact_time`. (A commit that continues into the next segment is still read.)
const XACT_PREFIX: usize = RECORD_HEADER + 3 + 5 + 5 + 8;
/// PostgreSQL's epoch, 2000-01-01 00:00:00 UTC, in Unix seconds.
const POSTGRES_EPOCH: i64 = 946_684_800;

/// What a segment's records say about time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentTimes {
    /// The newest commit or abort stamped in the segment.
    pub newest_commit: Option<Timestamp>,
    /// Records read before the end of valid WAL.
    pub records: usize,
}

/// The times of the records that begin in `segment` (a whole segment file, as archived).
/// Bytes that are not WAL yield no records, never an error: the caller then knows nothing.
pub fn segment_times(segment: &[u8]) -> SegmentTimes {
    let mut times = SegmentTimes::default();
    let Some(mut reader) = Reader::new(segment) else {
        return times;
    };
    let mut prev: Option<u64> = None;
    while let Some(start) = reader.next_record_start() {
        let Some(header) = reader.read(start, RECORD_HEADER) else {
            break;
        };
        let total = u32_at(&header, 0) as usize;
        let link = u64_at(&header, 8);
        if total < RECORD_HEADER || prev.is_some_and(|p| p != link) {
            break; // the end of valid WAL
        }
        let (info, rmid) = (header[16], header[17]);
        if rmid == RM_XACT_ID
            && STAMPED_XACT.contains(&(info & XLOG_XACT_OPMASK))
            && let Some(at) = reader
                .read(start, total.min(XACT_PREFIX))
                .and_then(|record| xact_time(&record[RECORD_HEADER..]))
        {
            times.newest_commit = times.newest_commit.max(Some(at));
        }
        times.records += 1;
        prev = Some(reader.address(start));
        if !reader.skip_record(start, total) {
            break;
        }
    }
    times
}

/// The `xact_time` that begins the main data of a commit or abort record (`body`: the record
/// after its header), past the headers of its origin and top-level xid if present.
fn xact_time(body: &[u8]) -> Option<Timestamp> {
    let mut at = 0;
    loop {
        match *body.get(at)? {
            BLOCK_ID_ORIGIN => at += 1 + 2,
            BLOCK_ID_TOPLEVEL_XID => at += 1 + 4,
            BLOCK_ID_DATA_SHORT => {
                at += 1 + 1;
                break;
            }
            BLOCK_ID_DATA_LONG => {
                at += 1 + 4;
                break;
            }
            _ => return None, // block references: not a commit's shape
        }
    }
    let micros = i64::from_le_bytes(body.get(at..at + 8)?.try_into().ok()?);
    let unix_micros = micros.checked_add(POSTGRES_EPOCH.checked_mul(1_000_000)?)?;
    Timestamp::from_microsecond(unix_micros).ok()
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// A segment as a stream of record bytes: offsets are positions in the file; reading skips
/// the page headers in between.
struct Reader<'a> {
    segment: &'a [u8],
    page: usize,
    /// The WAL address of the segment's first byte.
    base: u64,
    /// Where the next record may begin.
    next: usize,
}

impl<'a> Reader<'a> {
    fn new(segment: &'a [u8]) -> Option<Self> {
        if segment.len() < LONG_HEADER {
            return None;
        }
        let (magic, info) = (u16_at(segment, 0), u16_at(segment, 2));
        if magic < PAGE_MAGIC_MIN || info & XLP_LONG_HEADER == 0 {
            return None;
        }
        let base = u64_at(segment, 8);
        // `xlp_sysid` at 24, then the segment and page sizes.
        let segment_size = u32_at(segment, 32) as usize;
        let page = u32_at(segment, 36) as usize;
        if !page.is_power_of_two() || page < 1024 || segment_size != segment.len() {
            return None;
        }
        let mut reader = Self {
            segment,
            page,
            base,
            next: LONG_HEADER,
        };
        if info & XLP_FIRST_IS_CONTRECORD != 0 {
            // The tail of a record begun in the previous segment: skipped.
            let rest = u32_at(segment, 16) as usize;
            reader.next = reader.advance(LONG_HEADER, rest)?;
        }
        Some(reader)
    }

    fn header_len(&self, page_start: usize) -> usize {
        if page_start == 0 {
            LONG_HEADER
        } else {
            SHORT_HEADER
        }
    }

    /// Whether the page at `page_start` is this segment's: its magic and address.
    fn page_valid(&self, page_start: usize) -> bool {
        let Some(header) = self.segment.get(page_start..page_start + SHORT_HEADER) else {
            return false;
        };
        u16_at(header, 0) >= PAGE_MAGIC_MIN && u64_at(header, 8) == self.base + page_start as u64
    }

    /// The position `len` record bytes after `from`, page headers skipped.
    fn advance(&self, mut from: usize, mut len: usize) -> Option<usize> {
        loop {
            let page_start = from - from % self.page;
            let page_end = page_start + self.page;
            let room = page_end - from;
            if len <= room {
                return Some(from + len);
            }
            len -= room;
            if page_end >= self.segment.len() || !self.page_valid(page_end) {
                return None;
            }
            from = page_end + self.header_len(page_end);
        }
    }

    /// `len` record bytes from `from`, joined across pages.
    fn read(&self, mut from: usize, len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let page_start = from - from % self.page;
            let page_end = (page_start + self.page).min(self.segment.len());
            let take = (len - out.len()).min(page_end - from);
            out.extend_from_slice(self.segment.get(from..from + take)?);
            if out.len() == len {
                break;
            }
            if page_end >= self.segment.len() || !self.page_valid(page_end) {
                return None;
            }
            from = page_end + self.header_len(page_end);
        }
        Some(out)
    }

    /// Where the next record begins (8-byte aligned, past a page header when on one), if in
    /// this segment.
    fn next_record_start(&mut self) -> Option<usize> {
        let mut at = self.next.next_multiple_of(8);
        if at.is_multiple_of(self.page) {
            if at >= self.segment.len() || !self.page_valid(at) {
                return None;
            }
            at += self.header_len(at);
        }
        (at + 4 <= self.segment.len()).then_some(at)
    }

    /// Moves past the record at `start`; false when it ends beyond this segment.
    fn skip_record(&mut self, start: usize, total: usize) -> bool {
        match self.advance(start, total) {
            Some(end) => {
                self.next = end;
                true
            }
            None => false,
        }
    }

    /// The WAL address of file position `at`.
    fn address(&self, at: usize) -> u64 {
        self.base + at as u64
    }
}

#[cfg(test)]
#[path = "wal_records_tests.rs"]
mod tests;
