//! What the archive of one system holds, as the continuity check lists it, and how far each
//! timeline's folder was listed: a check that keeps its [`Holdings`] lists only past that point
//! the next time (issue 46: at the 5 s default a quiet cluster archives 17,280 segments a day,
//! and a check that listed the whole archive cost ~18 requests per day kept, every hour).

use std::collections::{BTreeMap, BTreeSet};

use crate::lsn::Lsn;
use crate::runs::Runs;
use crate::store::ObjectStore;
use crate::store::{Pager, StoreError};
use crate::wal::WalName;

/// What the archive of one system holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holdings {
    /// The size segment numbers are counted in.
    pub segment_size: u64,
    /// Whole segments (not `.partial`), by timeline, as segment numbers.
    pub segments: BTreeMap<u32, Runs>,
    /// Timelines with a history file.
    pub histories: BTreeSet<u32>,
    /// Gap markers (`<first>-<last>`) the disk policy left.
    pub gaps: Vec<(String, String)>,
    /// Per timeline, the key its folder's next listing starts after.
    pub(super) listed: BTreeMap<u32, String>,
}

impl Default for Holdings {
    fn default() -> Self {
        Self::new(super::DEFAULT_SEGMENT_SIZE)
    }
}

impl Holdings {
    pub fn new(segment_size: u64) -> Self {
        Self {
            segment_size,
            segments: BTreeMap::new(),
            histories: BTreeSet::new(),
            gaps: Vec::new(),
            listed: BTreeMap::new(),
        }
    }

    /// Sorts the keys listed under `prefix` (the system's archive) into segments, history
    /// files and gap markers; anything else (partial segments, backup history files) is not
    /// needed by a restore and is passed over.
    pub fn from_keys<'a>(
        prefix: &str,
        segment_size: u64,
        keys: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut holdings = Self::new(segment_size);
        holdings.add(prefix, keys);
        holdings
    }

    /// Sorts more keys in (one page of a listing).
    pub fn add<'a>(&mut self, prefix: &str, keys: impl IntoIterator<Item = &'a str>) {
        for key in keys {
            let Some(rest) = key.strip_prefix(prefix) else {
                continue;
            };
            if let Some(marker) = rest
                .strip_prefix("gaps/")
                .and_then(|m| m.strip_suffix(".json"))
            {
                if let Some((first, last)) = marker.split_once('-') {
                    self.gaps.push((first.to_owned(), last.to_owned()));
                }
                continue;
            }
            if let Some(timeline) = folder_timeline(rest) {
                let mark = self.listed.entry(timeline).or_default();
                if key > mark.as_str() {
                    key.clone_into(mark);
                }
            }
            let Some(name) = rest.rsplit('/').next().and_then(|n| n.strip_suffix(".zst")) else {
                continue;
            };
            if let Some(timeline) = name.strip_suffix(".history") {
                self.histories.extend(timeline_of(timeline));
            } else if name.len() == 24
                && WalName::parse(name).is_ok()
                && let Some(timeline) = timeline_of(&name[..8])
                && let Some(n) = self.number(name)
            {
                self.segments.entry(timeline).or_default().insert(n);
            }
        }
    }

    /// The segment number of `name`, in this archive's segment size.
    pub fn number(&self, name: &str) -> Option<u64> {
        Lsn::of_segment(name, self.segment_size).map(|lsn| lsn.0 / self.segment_size)
    }

    /// The name of segment `n` of `timeline`.
    pub fn name(&self, timeline: u32, n: u64) -> String {
        let per_xlogid = 0x1_0000_0000 / self.segment_size;
        format!("{timeline:08X}{:08X}{:08X}", n / per_xlogid, n % per_xlogid)
    }

    pub(super) fn newest_timeline(&self) -> Option<u32> {
        let segments = self.segments.keys().next_back().copied();
        segments.max(self.histories.iter().next_back().copied())
    }

    /// Lists the archive at `prefix` into these holdings: history files and gap markers in
    /// full (they are few), each timeline's folder from where the last listing of it stopped
    /// (from the start when it was never listed). Returns the list requests made.
    pub async fn list(
        &mut self,
        store: &dyn ObjectStore,
        prefix: &str,
    ) -> Result<usize, StoreError> {
        self.histories.clear();
        self.gaps.clear();
        let marks = self.listed.clone();
        let mut pages = Pager::new(store, prefix, &[]);
        if let Some(first) = marks.values().next() {
            pages = pages.after(first);
        }
        while let Some(page) = pages.next().await? {
            self.add(prefix, page.iter().map(|o| o.key.as_str()));
            // Entering a folder listed before: on from where that listing stopped.
            let last = page.last().map(|o| o.key.as_str()).unwrap_or_default();
            let folder = last.strip_prefix(prefix).and_then(folder_timeline);
            if let Some(mark) = folder.and_then(|t| marks.get(&t))
                && mark.as_str() > last
            {
                pages.skip_to(mark);
            }
        }
        Ok(pages.requests)
    }

    /// The next listing of `timeline`'s folder starts at segment `n` at the latest: one not
    /// archived yet when this check listed may arrive in a slot already listed past; a walk
    /// from a base backup needs nothing before its first segment.
    pub(super) fn relist_from(&mut self, prefix: &str, timeline: u32, n: u64) {
        let key = format!("{prefix}{timeline:08X}/{}", self.name(timeline, n));
        match self.listed.get_mut(&timeline) {
            Some(mark) if key >= *mark => {}
            Some(mark) => *mark = key,
            None => {
                self.listed.insert(timeline, key);
            }
        }
    }
}

/// The timeline whose folder `rest` (a key below the system's prefix) is in.
fn folder_timeline(rest: &str) -> Option<u32> {
    let (folder, _) = rest.split_once('/')?;
    timeline_of(folder)
}

pub(super) fn timeline_of(hex: &str) -> Option<u32> {
    (hex.len() == 8).then(|| u32::from_str_radix(hex, 16).ok())?
}
