//! WAL segments built by hand, as PostgreSQL lays them out (pages with headers, 8-byte aligned
//! records that cross pages, `xl_prev` links), for tests of what reads records back.

/// One record: resource manager, info bits and main data (no block references).
pub struct Record {
    pub rmid: u8,
    pub info: u8,
    pub data: Vec<u8>,
}

/// PostgreSQL's epoch, 2000-01-01, in Unix seconds.
const POSTGRES_EPOCH: i64 = 946_684_800;

/// A commit record (`RM_XACT_ID`, `XLOG_XACT_COMMIT`) stamped `unix_micros`, with `pad` more
/// bytes of main data (a commit's subtransactions, invalidations…).
pub fn commit(unix_micros: i64, pad: usize) -> Record {
    xact(0x00, unix_micros, pad)
}

/// An abort record (`XLOG_XACT_ABORT`) stamped `unix_micros`.
pub fn abort(unix_micros: i64) -> Record {
    xact(0x20, unix_micros, 0)
}

fn xact(info: u8, unix_micros: i64, pad: usize) -> Record {
    let mut data = (unix_micros - POSTGRES_EPOCH * 1_000_000)
        .to_le_bytes()
        .to_vec();
    data.resize(8 + pad, 0x5A);
    Record {
        rmid: 1,
        info,
        data,
    }
}

/// A record of another kind (`RM_HEAP_ID`, an insert) with `len` bytes of data.
pub fn other(len: usize) -> Record {
    Record {
        rmid: 10,
        info: 0,
        data: vec![0x33; len],
    }
}

/// A segment of `size` bytes in pages of `page`, at WAL address `base`: first `carried` bytes
/// of a record begun in the previous segment, then `records`, chained by `xl_prev`; zeros
/// after. A record that does not fit continues past the end.
pub fn segment(page: usize, size: usize, base: u64, carried: usize, records: &[Record]) -> Vec<u8> {
    let mut out = vec![0u8; size];
    let header = |out: &mut Vec<u8>, at: usize, rem: usize| {
        let long = at == 0;
        let mut info: u16 = if rem > 0 { 0x0001 } else { 0 };
        if long {
            info |= 0x0002;
        }
        out[at..at + 2].copy_from_slice(&0xD10Du16.to_le_bytes());
        out[at + 2..at + 4].copy_from_slice(&info.to_le_bytes());
        out[at + 4..at + 8].copy_from_slice(&1u32.to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&(base + at as u64).to_le_bytes());
        out[at + 16..at + 20].copy_from_slice(&(rem as u32).to_le_bytes());
        if long {
            out[at + 24..at + 32].copy_from_slice(&7u64.to_le_bytes());
            out[at + 32..at + 36].copy_from_slice(&(size as u32).to_le_bytes());
            out[at + 36..at + 40].copy_from_slice(&(page as u32).to_le_bytes());
            at + 40
        } else {
            at + 24
        }
    };
    // Writes `bytes` from `pos`, continuing on new pages; the position after, or None at the end.
    let write = |out: &mut Vec<u8>, mut pos: usize, bytes: &[u8]| -> Option<usize> {
        let mut rest = bytes;
        loop {
            let page_end = pos - pos % page + page;
            let take = rest.len().min(page_end - pos);
            out[pos..pos + take].copy_from_slice(&rest[..take]);
            rest = &rest[take..];
            pos += take;
            if rest.is_empty() {
                return Some(pos);
            }
            if page_end >= size {
                return None;
            }
            pos = header(out, page_end, rest.len());
        }
    };
    let mut pos = header(&mut out, 0, carried);
    if carried > 0 {
        match write(&mut out, pos, &vec![0xAB; carried]) {
            Some(after) => pos = after,
            None => return out,
        }
    }
    let mut prev = 0x0F00_0000u64;
    for record in records {
        pos = pos.next_multiple_of(8);
        if pos >= size {
            break;
        }
        if pos.is_multiple_of(page) {
            pos = header(&mut out, pos, 0);
        }
        let total = 24 + 2 + record.data.len();
        let mut bytes = Vec::with_capacity(total);
        bytes.extend_from_slice(&(total as u32).to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&prev.to_le_bytes());
        bytes.extend_from_slice(&[record.info, record.rmid, 0, 0]);
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.push(255);
        bytes.push(u8::try_from(record.data.len()).expect("short main data only"));
        bytes.extend_from_slice(&record.data);
        prev = base + pos as u64;
        match write(&mut out, pos, &bytes) {
            Some(after) => pos = after,
            None => break,
        }
    }
    out
}
