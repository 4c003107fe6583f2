//! The archive on day 30 (issue 46), a benchmark on real MinIO: `scripts/bench-archive-day30.sh`.
//!
//! A generator writes an archive shaped like 30 days at the 5 s `archive_timeout` (17,280
//! segments a day; `TUSK_BENCH_SEGMENTS_PER_DAY` for another rate): a base backup a day, WAL
//! on timeline 1 then, from day 15, timeline 2 (its history file), and a gap marker the disk
//! policy left on day 3. Segments are small stand-ins: only listings are exercised here (a
//! recovery fetches each segment by its key; the real-pod PITR scenario restores a real tail).
//! At day 1 and at day 30 it prints, for each walk the product makes, its requests and seconds:
//! `base-restore latest`, restore admission (a time, an LSN, the end of the archive), the
//! continuity check in full and as the hourly check (what arrived in an hour), retention by a
//! 7-day recovery window, and at the end `onDelete: Delete`. Each must succeed; the steady-state
//! costs must not grow with the archive's age. Not a timed test: it asserts what each walk
//! finds, and prints the figures.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use backup_store::catalog;
use backup_store::compression::Compression;
use backup_store::continuity::{self, Known};
use backup_store::layout::ClusterLocation;
use backup_store::manifest::{Manifest, Method, PhysicalBackup};
use backup_store::ownership::Owner;
use backup_store::retention::Policy;
use backup_store::store::s3::{S3Config, S3Credentials, S3Store};
use backup_store::store::{Counted, ObjectStore};
use backup_store::wal::{self, WalArchive, WalName};
use bytes::Bytes;
use futures::StreamExt;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tusk::clusters::restore_window;
use tusk::crd::RestoreTarget;

const SYSTEM: u64 = 7_400_000_000_000_000_001;
const SEGMENT: u64 = 16 << 20;
const BUCKET: &str = "tusk-backups";
const OWNER: &str = "uid-day30";
const DAYS: u64 = 30;
const SWITCH_DAY: u64 = 15;
const PARALLEL_PUTS: usize = 64;

fn per_day() -> u64 {
    std::env::var("TUSK_BENCH_SEGMENTS_PER_DAY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(17_280)
}

fn name(timeline: u32, n: u64) -> String {
    format!("{timeline:08X}{:08X}{:08X}", n / 256, n % 256)
}

fn lsn(n: u64) -> String {
    let at = n * SEGMENT + 0x28;
    format!("{:X}/{:X}", at >> 32, at & 0xFFFF_FFFF)
}

struct Generator<'a> {
    store: &'a dyn ObjectStore,
    loc: ClusterLocation,
    per_day: u64,
    /// The next segment number to archive.
    next: u64,
    now: Timestamp,
    puts: u64,
}

impl Generator<'_> {
    fn wal(&self) -> String {
        self.loc.wal_prefix(SYSTEM)
    }

    fn timeline_of(&self, n: u64) -> u32 {
        if n >= SWITCH_DAY * self.per_day { 2 } else { 1 }
    }

    /// The gap the disk policy left on day 3: ten segments, released unarchived.
    fn gap(&self) -> (u64, u64) {
        let first = 3 * self.per_day + 100;
        (first, first + 9)
    }

    async fn put_all(&mut self, objects: Vec<(String, Bytes)>) {
        self.puts += objects.len() as u64;
        let store = self.store;
        let mut puts = futures::stream::iter(objects)
            .map(|(key, body)| async move { store.put(&key, body).await.map_err(|e| (key, e)) })
            .buffer_unordered(PARALLEL_PUTS);
        while let Some(put) = puts.next().await {
            if let Err((key, e)) = put {
                panic!("put {key}: {e}");
            }
        }
    }

    /// Archives segments up to (not including) `until`, with what falls on the way: the base
    /// backup at the start of each day, the history file at the switch, the gap marker.
    async fn archive_until(&mut self, until: u64) {
        let (gap_first, gap_last) = self.gap();
        while self.next < until {
            let day = self.next / self.per_day;
            let day_end = ((day + 1) * self.per_day).min(until);
            let mut objects = Vec::new();
            if self.next == day * self.per_day {
                objects.extend(self.base_backup(day));
            }
            if day == SWITCH_DAY && self.next == day * self.per_day {
                self.history(self.next).await;
            }
            for n in self.next..day_end {
                if (gap_first..=gap_last).contains(&n) {
                    continue;
                }
                let t = self.timeline_of(n);
                let key = format!("{}{t:08X}/{}.zst", self.wal(), name(t, n));
                objects.push((key, Bytes::from_static(b"w")));
            }
            if (self.next..day_end).contains(&gap_first) {
                let marker = format!(
                    "{}gaps/{}-{}.json",
                    self.wal(),
                    name(1, gap_first),
                    name(1, gap_last)
                );
                objects.push((marker, Bytes::from_static(b"{}")));
            }
            self.put_all(objects).await;
            self.next = day_end;
        }
    }

    /// Timeline 2's history file, as the archiver uploads it: the switch in segment `n`.
    async fn history(&mut self, n: u64) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("00000002.history");
        let text = format!("1\t{}\tno recovery target specified\n", lsn(n));
        std::fs::write(&path, text).expect("history file");
        let archive = WalArchive::new(&self.loc, SYSTEM);
        let file = WalName::parse("00000002.history").expect("name");
        wal::push_file(self.store, &archive, &file, &path)
            .await
            .expect("push the history file");
        self.puts += 1;
    }

    /// Day `day`'s base backup: started in the day's second segment, completed at the day's
    /// time (day 30 is now).
    fn base_backup(&self, day: u64) -> Vec<(String, Bytes)> {
        let id = format!("base-{day:02}");
        let completed = self.now - SignedDuration::from_hours(24 * (DAYS as i64 - day as i64) - 1);
        let start = day * self.per_day + 1;
        let manifest = Manifest {
            format_version: backup_store::manifest::FORMAT_VERSION,
            backup_id: id.clone(),
            namespace: self.loc.namespace().into(),
            cluster: self.loc.cluster().into(),
            cluster_uid: Some(OWNER.into()),
            started_at: completed,
            completed_at: completed,
            server_version: "15".into(),
            pg_dump_version: "pg_basebackup (PostgreSQL) 15".into(),
            compression: Compression::Zstd,
            files: Vec::new(),
            physical: Some(PhysicalBackup {
                system_identifier: SYSTEM.to_string(),
                timeline: self.timeline_of(start),
                start_lsn: lsn(start),
                stop_lsn: lsn(start + 1),
                wal_segment_size: Some(SEGMENT),
            }),
        };
        let json = Bytes::from(manifest.to_json().expect("manifest"));
        vec![
            (
                self.loc.object_key(&id, "base.tar.zst"),
                Bytes::from_static(b"b"),
            ),
            (self.loc.manifest_key(&id), json),
        ]
    }
}

/// One line of the table: what a walk cost.
fn row(day: u64, what: &str, counted: &Counted<'_>, took: Duration, found: &str) {
    let r = counted.take();
    println!(
        "archive day {day:>2} | {what:<36} | {:>5} lists {:>4} gets {:>5} deletes | {:>7.2} s | {found}",
        r.lists,
        r.gets,
        r.deletes,
        took.as_secs_f64()
    );
}

async fn admission(
    counted: &Counted<'_>,
    loc: &ClusterLocation,
    day: u64,
    at: Timestamp,
    g: &Generator<'_>,
) {
    let newest = g.next - 1;
    let targets = [
        (
            "admission: a time an hour ago",
            RestoreTarget {
                time: Some((at - SignedDuration::from_hours(1)).to_string()),
                ..RestoreTarget::default()
            },
        ),
        (
            "admission: an LSN in the newest hour",
            RestoreTarget {
                lsn: Some(lsn(newest - 100)),
                ..RestoreTarget::default()
            },
        ),
        (
            "admission: the end of the archive",
            RestoreTarget::default(),
        ),
    ];
    for (what, target) in targets {
        let started = Instant::now();
        let refusal = restore_window::admit(counted, loc, &target, "latest", "ns/db", None)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(refusal, None, "{what}: refused");
        row(day, what, counted, started.elapsed(), "admitted");
    }
}

async fn continuity_checks(
    counted: &Counted<'_>,
    loc: &ClusterLocation,
    day: u64,
    g: &mut Generator<'_>,
) {
    let none = BTreeSet::new();
    let now = g.now.as_second();
    let started = Instant::now();
    let whole = continuity::check(counted, loc, SYSTEM, &none, now, None)
        .await
        .expect("a whole check");
    assert_eq!(whole.missing_count, 0, "{whole:?}");
    let found = format!(
        "{} segments, {} released",
        whole.segments, whole.released_count
    );
    row(
        day,
        "continuity check, whole archive",
        counted,
        started.elapsed(),
        &found,
    );

    let mut known: Option<Known> = None;
    continuity::check_since(counted, loc, SYSTEM, &none, now, &mut known)
        .await
        .expect("the first kept check");
    counted.take();
    // An hour at the 5 s default arrives; the hourly check lists it.
    g.archive_until(g.next + 720).await;
    let started = Instant::now();
    let (hourly, _) = continuity::check_since(counted, loc, SYSTEM, &none, now + 3600, &mut known)
        .await
        .expect("the hourly check");
    assert_eq!(hourly.segments, whole.segments + 720, "{hourly:?}");
    assert_eq!(hourly.missing_count, 0, "{hourly:?}");
    row(
        day,
        "continuity check, hourly (720 new)",
        counted,
        started.elapsed(),
        "whole",
    );
}

async fn at_day(day: u64, counted: &Counted<'_>, loc: &ClusterLocation, g: &mut Generator<'_>) {
    println!(
        "archive day {day:>2}: {} objects in the bucket ({} segments archived)",
        g.puts, g.next
    );
    // The time of day `day` (day 30 is now).
    let at = g.now - SignedDuration::from_hours(24 * (DAYS - day) as i64);
    counted.take();
    let started = Instant::now();
    let latest = catalog::resolve(counted, loc, "latest", Some(Method::Physical))
        .await
        .expect("base-restore latest");
    row(
        day,
        "base-restore latest",
        counted,
        started.elapsed(),
        &latest.backup_id,
    );
    admission(counted, loc, day, at, g).await;
    continuity_checks(counted, loc, day, g).await;

    let policy = Policy {
        keep: None,
        max_age: None,
        recovery_window: Some(Duration::from_secs(7 * 86_400)),
    };
    let started = Instant::now();
    let pruned = backup_store::prune::prune(counted, loc, &Owner::new(Some(OWNER)), policy, at)
        .await
        .expect("retention");
    let found = format!(
        "{} base backups and {} WAL files deleted",
        pruned.deleted.len(),
        pruned.wal_objects_deleted
    );
    row(
        day,
        "retention, 7-day recovery window",
        counted,
        started.elapsed(),
        &found,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: scripts/bench-archive-day30.sh"]
async fn the_archive_on_day_30() {
    let minio = tusk_testkit::minio::start(None).await;
    let s3 = S3Store::new(S3Config {
        bucket: BUCKET.into(),
        endpoint: Some(minio.endpoint.clone()),
        region: "us-east-1".into(),
        force_path_style: true,
        credentials: Some(S3Credentials {
            access_key_id: tusk_testkit::minio::ACCESS_KEY.into(),
            secret_access_key: tusk_testkit::minio::SECRET_KEY.into(),
        }),
        ca_bundle: None,
    })
    .await
    .expect("s3 store");
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = s3.client().create_bucket().bucket(BUCKET).send().await {
        assert!(Instant::now() < deadline, "create bucket: {e:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let loc = ClusterLocation::new("tusk", "ns", "db").expect("location");
    let counted = Counted::new(&s3);
    let per_day = per_day();
    let mut g = Generator {
        store: &s3,
        loc: loc.clone(),
        per_day,
        next: 0,
        now: Timestamp::now(),
        puts: 0,
    };
    let started = Instant::now();
    g.archive_until(per_day).await;
    let rate = g.puts as f64 / started.elapsed().as_secs_f64();
    println!("archive generator: {} objects at {rate:.0}/s", g.puts);
    at_day(1, &counted, &loc, &mut g).await;

    g.archive_until(DAYS * per_day).await;
    at_day(30, &counted, &loc, &mut g).await;

    let started = Instant::now();
    let owner = Owner::new(Some(OWNER));
    let backups = catalog::delete_cluster(&counted, &loc, &owner)
        .await
        .expect("onDelete: Delete, the backups");
    let wal = catalog::delete_wal(&counted, &loc, SYSTEM)
        .await
        .expect("onDelete: Delete, the archive");
    let found = format!("{} + {wal} objects deleted", backups.objects_deleted);
    row(
        30,
        "onDelete: Delete (after retention)",
        &counted,
        started.elapsed(),
        &found,
    );
    let left = s3.list_page(&loc.prefix(), None).await.expect("list");
    assert!(
        left.is_empty(),
        "left behind: {:?}",
        &left[..left.len().min(5)]
    );
}
