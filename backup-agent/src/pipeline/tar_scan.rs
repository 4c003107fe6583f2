//! Reads a tar stream on its way to the bucket and keeps a copy of a few small members
//! (`backup_manifest`, `backup_label`): what a base backup says about itself, without a second
//! pass over it or a local copy. Only the ustar header fields PostgreSQL writes are read: name,
//! size and type.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::inspect::Inspect;

const BLOCK: usize = 512;
/// A member larger than this is not kept (a `backup_manifest` lists every file: a few MiB for
/// a large cluster).
const KEEP_LIMIT: u64 = 64 << 20;

/// The members kept so far, by name.
pub type Kept = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

enum State {
    Header(Vec<u8>),
    Body {
        /// Bytes of the member still to come, then padding to the block.
        left: u64,
        padding: u64,
        keep: Option<(String, Vec<u8>)>,
    },
    /// The end-of-archive blocks, or a header that could not be read: pass through only.
    Done,
}

/// `inner`, with a copy of its members named in `wanted` kept as they pass; `mark` is notified
/// when a member of its name begins (once: a permit waits for a later waiter).
pub fn tar_scan<R>(
    inner: R,
    wanted: &'static [&'static str],
    mark: Option<(&'static str, Arc<Notify>)>,
) -> (Inspect<R, impl FnMut(&[u8]) + Unpin>, Kept) {
    let kept = Kept::default();
    let mut scanner = TarScan {
        wanted,
        mark,
        state: State::Header(Vec::with_capacity(BLOCK)),
        kept: kept.clone(),
    };
    (
        Inspect::new(inner, move |bytes: &[u8]| scanner.scan(bytes)),
        kept,
    )
}

struct TarScan {
    wanted: &'static [&'static str],
    mark: Option<(&'static str, Arc<Notify>)>,
    state: State,
    kept: Kept,
}

impl TarScan {
    fn scan(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Done => return,
                State::Header(header) => {
                    let take = bytes.len().min(BLOCK - header.len());
                    header.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if header.len() == BLOCK {
                        let block = std::mem::take(header);
                        self.state = self.member(&block);
                    }
                }
                State::Body {
                    left,
                    padding,
                    keep,
                } => {
                    if *left > 0 {
                        let take = bytes
                            .len()
                            .min(usize::try_from(*left).unwrap_or(usize::MAX));
                        if let Some((_, copy)) = keep {
                            copy.extend_from_slice(&bytes[..take]);
                        }
                        bytes = &bytes[take..];
                        *left -= take as u64;
                    } else {
                        let take = bytes.len().min(usize::try_from(*padding).unwrap_or(0));
                        bytes = &bytes[take..];
                        *padding -= take as u64;
                    }
                    if *left == 0 && *padding == 0 {
                        if let Some(done) = keep.take() {
                            self.kept
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(done);
                        }
                        self.state = State::Header(Vec::with_capacity(BLOCK));
                    }
                }
            }
        }
    }

    /// The state after header `block`.
    fn member(&self, block: &[u8]) -> State {
        if block.iter().all(|&b| b == 0) {
            return State::Done;
        }
        let field = |range: std::ops::Range<usize>| {
            let raw = &block[range];
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).trim().to_owned()
        };
        let Ok(size) = u64::from_str_radix(&field(124..136), 8) else {
            return State::Done;
        };
        let name = field(0..100);
        let name = name.trim_start_matches("./").to_owned();
        if let Some((marked, notify)) = &self.mark
            && *marked == name
        {
            notify.notify_one();
        }
        let keep = (self.wanted.contains(&name.as_str()) && size <= KEEP_LIMIT)
            .then(|| (name, Vec::with_capacity(usize::try_from(size).unwrap_or(0))));
        let padding = (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64;
        match (size, padding) {
            (0, 0) => {
                if let Some(done) = keep {
                    self.kept
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(done);
                }
                State::Header(Vec::with_capacity(BLOCK))
            }
            _ => State::Body {
                left: size,
                padding,
                keep,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    fn header(name: &str, size: usize) -> Vec<u8> {
        let mut block = vec![0u8; BLOCK];
        block[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{size:011o}\0");
        block[124..136].copy_from_slice(size.as_bytes());
        block[156] = b'0';
        block
    }

    fn member(name: &str, body: &[u8]) -> Vec<u8> {
        let mut bytes = header(name, body.len());
        bytes.extend_from_slice(body);
        bytes.resize(bytes.len().div_ceil(BLOCK) * BLOCK, 0);
        bytes
    }

    #[tokio::test]
    async fn the_wanted_members_are_kept_and_the_stream_passes_unchanged() {
        let mut tar = member("backup_label", b"START WAL LOCATION: 0/2000028\n");
        tar.extend(member("base/1/1259", &vec![7u8; 3 * BLOCK + 5]));
        tar.extend(member("global/pg_control", &[]));
        tar.extend(member("backup_manifest", br#"{"WAL-Ranges": []}"#));
        tar.extend(vec![0u8; 2 * BLOCK]);
        // Read in odd sizes, so headers and bodies arrive split.
        let reader = tokio::io::BufReader::with_capacity(37, tar.as_slice());
        let control = Arc::new(Notify::new());
        let mark = Some(("global/pg_control", control.clone()));
        let (mut scan, kept) = tar_scan(reader, &["backup_manifest", "backup_label"], mark);
        let mut passed = Vec::new();
        scan.read_to_end(&mut passed).await.unwrap();
        assert_eq!(passed, tar);
        // The permit the mark left: a waiter after the fact is woken at once.
        tokio::time::timeout(std::time::Duration::from_secs(1), control.notified())
            .await
            .expect("global/pg_control marked");
        let kept = kept.lock().unwrap().clone();
        assert_eq!(
            kept,
            vec![
                (
                    "backup_label".to_owned(),
                    b"START WAL LOCATION: 0/2000028\n".to_vec()
                ),
                (
                    "backup_manifest".to_owned(),
                    br#"{"WAL-Ranges": []}"#.to_vec()
                ),
            ]
        );
    }
}
