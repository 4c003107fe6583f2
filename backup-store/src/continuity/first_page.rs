//! The first page of an archived segment: whose it is, and which WAL it holds.

use async_compression::tokio::bufread::ZstdDecoder;
use tokio::io::AsyncReadExt;

use crate::lsn::Lsn;
use crate::store::{self, ObjectStore};
use crate::wal::{WalArchive, WalError, WalName};

/// Reads the long header of `name`'s first page (decompressing only its start) and says what in
/// it is not this archive's: the system identifier, the segment size, or the page's address.
pub(super) async fn first_page(
    store: &dyn ObjectStore,
    archive: &WalArchive,
    name: &str,
    system: u64,
    segment_size: u64,
    expected: Lsn,
) -> Result<Option<String>, WalError> {
    let file = WalName::parse(name)?;
    let packed = match store::get_bytes(store, &archive.key(&file)).await {
        Ok(packed) => packed,
        Err(e) if e.is_not_found() => return Ok(None), // deleted by retention meanwhile
        Err(e) => return Err(e.into()),
    };
    let mut header = [0u8; LONG_HEADER];
    let read = ZstdDecoder::new(&packed[..]).read_exact(&mut header).await;
    if let Err(e) = read {
        return Ok(Some(format!("its first page cannot be read ({e})")));
    }
    Ok(header_mismatch(&header, system, segment_size, expected))
}

/// `XLogLongPageHeaderData`: the short header (magic, info, timeline, page address, remaining
/// length; 24 bytes aligned), then system identifier, segment size and block size.
pub(super) const LONG_HEADER: usize = 40;
const XLP_LONG_HEADER: u16 = 0x0002;

/// What in a segment's first page header is not this archive's (little-endian, as the servers
/// Tusk runs write it).
pub fn header_mismatch(
    header: &[u8; LONG_HEADER],
    system: u64,
    segment_size: u64,
    expected: Lsn,
) -> Option<String> {
    let u16_at = |i: usize| u16::from_le_bytes([header[i], header[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().unwrap_or_default());
    let u64_at = |i: usize| u64::from_le_bytes(header[i..i + 8].try_into().unwrap_or_default());
    if u16_at(2) & XLP_LONG_HEADER == 0 {
        return Some("its first page has no long header: not the start of a segment".into());
    }
    let (page, sysid, size) = (u64_at(8), u64_at(24), u64::from(u32_at(32)));
    if sysid != system {
        return Some(format!("it belongs to database system {sysid}"));
    }
    if size != segment_size {
        return Some(format!(
            "its segments are {size} bytes, this system's {segment_size}"
        ));
    }
    if page != expected.0 {
        return Some(format!("it holds the WAL at {}, not {expected}", Lsn(page)));
    }
    None
}
