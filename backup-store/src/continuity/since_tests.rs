//! A check that keeps what it listed ([`check_since`]) on an in-memory bucket: it costs what
//! arrived since the last one whatever the archive's age, and reports what a whole listing
//! ([`check`]) reports, through late arrivals, holes, a new timeline and deletions by hand.

use bytes::Bytes;

use super::*;
use crate::compression::Compression;
use crate::manifest::{Manifest, PhysicalBackup};
use crate::store::memory::MemoryStore;

const SYSTEM: u64 = 7;

struct Archive {
    store: MemoryStore,
    loc: ClusterLocation,
    known: Option<Known>,
}

impl Archive {
    /// A base backup starting in segment 2 of timeline 1.
    async fn new() -> Self {
        let store = MemoryStore::new("mem://b");
        let loc = ClusterLocation::new("p", "ns", "db").unwrap();
        let manifest = Manifest {
            format_version: crate::manifest::FORMAT_VERSION,
            backup_id: "base-1".into(),
            namespace: "ns".into(),
            cluster: "db".into(),
            cluster_uid: Some("uid".into()),
            started_at: "2026-11-01T00:00:00Z".parse().unwrap(),
            completed_at: "2026-11-01T00:00:00Z".parse().unwrap(),
            server_version: "15".into(),
            pg_dump_version: "pg_basebackup (PostgreSQL) 15".into(),
            compression: Compression::Zstd,
            files: Vec::new(),
            physical: Some(PhysicalBackup {
                system_identifier: SYSTEM.to_string(),
                timeline: 1,
                start_lsn: "0/2000028".into(),
                stop_lsn: "0/2000100".into(),
                wal_segment_size: Some(16 << 20),
            }),
        };
        let json = Bytes::from(manifest.to_json().unwrap());
        store.put(&loc.manifest_key("base-1"), json).await.unwrap();
        Self {
            store,
            loc,
            known: None,
        }
    }

    fn prefix(&self) -> String {
        self.loc.wal_prefix(SYSTEM)
    }

    fn key(&self, timeline: u32, n: u64) -> String {
        let name = Holdings::default().name(timeline, n);
        format!("{}{timeline:08X}/{name}.zst", self.prefix())
    }

    fn archive(&self, timeline: u32, numbers: impl IntoIterator<Item = u64>) {
        for n in numbers {
            self.store.insert(&self.key(timeline, n), "w");
        }
    }

    async fn kept(&mut self, pending: &[String], at: i64) -> (ArchiveContinuity, usize) {
        let pending: BTreeSet<String> = pending.iter().cloned().collect();
        let store = &self.store;
        check_since(store, &self.loc, SYSTEM, &pending, at, &mut self.known)
            .await
            .unwrap()
    }

    async fn whole(&self, pending: &[String]) -> ArchiveContinuity {
        let pending: BTreeSet<String> = pending.iter().cloned().collect();
        check(&self.store, &self.loc, SYSTEM, &pending, 0, None)
            .await
            .unwrap()
    }
}

/// What the two kinds of check must agree on.
fn counts(r: &ArchiveContinuity) -> (u64, u64, u64, u64, Option<String>) {
    let last = r.last_segment.clone();
    (
        r.segments,
        r.pending,
        r.missing_count,
        r.released_count,
        last,
    )
}

#[tokio::test]
async fn a_kept_check_costs_what_arrived_on_day_1_as_on_day_30() {
    let mut costs = Vec::new();
    for held in [3_000u64, 60_000] {
        let mut a = Archive::new().await;
        a.archive(1, 2..=held);
        let (first, full) = a.kept(&[], 0).await;
        assert_eq!(counts(&first), counts(&a.whole(&[]).await));
        assert!(full as u64 >= held / 1000, "{full} requests for {held}");
        // An hour at the 5 s default.
        a.archive(1, held + 1..=held + 720);
        let (next, since) = a.kept(&[], 3600).await;
        assert_eq!(counts(&next), counts(&a.whole(&[]).await));
        assert_eq!(next.segments, held + 719);
        costs.push(since);
    }
    assert_eq!(costs[0], costs[1], "day 1 and day 30: {costs:?}");
    assert!(costs[0] <= 2, "{costs:?} requests for 720 new segments");
}

#[tokio::test]
async fn a_segment_pending_at_one_check_is_seen_when_it_lands_behind_the_listing() {
    let mut a = Archive::new().await;
    let late = Holdings::default().name(1, 50);
    a.archive(1, (2..=100).filter(|n| *n != 50));
    let (first, _) = a.kept(std::slice::from_ref(&late), 0).await;
    assert_eq!((first.pending, first.missing_count), (1, 0));
    // Uploaded in parallel: 50 lands after 51..=100 were listed.
    a.archive(1, [50]);
    a.archive(1, 101..=110);
    let (next, _) = a.kept(&[], 60).await;
    assert_eq!(
        counts(&next),
        (109, 0, 0, 0, Some(Holdings::default().name(1, 110)))
    );
}

#[tokio::test]
async fn a_hole_is_listed_in_full_until_it_is_filled() {
    let mut a = Archive::new().await;
    a.archive(1, (2..=3_000).filter(|n| *n != 1_500));
    let (broken, _) = a.kept(&[], 0).await;
    assert_eq!(broken.missing, [Holdings::default().name(1, 1_500)]);
    // Filled by another writer (a promoted standby's pg_wal): the next check sees it.
    a.archive(1, [1_500]);
    let (healed, requests) = a.kept(&[], 60).await;
    assert_eq!(healed.missing_count, 0, "{healed:?}");
    assert!(requests >= 3, "listed in full: {requests}");
    let (_, steady) = a.kept(&[], 120).await;
    assert!(steady <= 2, "then from where it stopped: {steady}");
}

#[tokio::test]
async fn a_new_timeline_is_followed_from_its_history() {
    let mut a = Archive::new().await;
    a.archive(1, 2..=1_200);
    a.kept(&[], 0).await;
    // A failover in segment 1,200: timeline 2 goes on from there.
    let history = format!("{}history/00000002.history.zst", a.prefix());
    let text = "1\t4/B0000000\tno recovery target specified\n";
    let packed = crate::wal::compress(text.as_bytes()).await.unwrap();
    a.store.insert(&history, packed);
    a.archive(2, 1_200..=2_500);
    let (after, _) = a.kept(&[], 60).await;
    assert_eq!(counts(&after), counts(&a.whole(&[]).await));
    assert_eq!(after.timelines, [1, 2]);
    assert_eq!(after.segments, 1_198 + 1_301);
}

#[tokio::test]
async fn a_file_deleted_by_hand_is_seen_within_a_day() {
    let mut a = Archive::new().await;
    a.archive(1, 2..=2_000);
    a.kept(&[], 0).await;
    a.store.delete_many(&[a.key(1, 700)]).await.unwrap();
    let (soon, _) = a.kept(&[], 3600).await;
    assert_eq!(soon.missing_count, 0, "not listed again within the day");
    let (day, _) = a.kept(&[], RELIST_EVERY_SECONDS).await;
    assert_eq!(day.missing, [Holdings::default().name(1, 700)]);
}
