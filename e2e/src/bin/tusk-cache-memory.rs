//! Where the operator's memory goes, per watched kind: lists what the operator's watches list
//! (same selectors, pages of 100), compacts each object as the operator does before caching it
//! (`tusk::runtime::compact`, `drop_managed_fields`), keeps it in a reflector store (or packs it
//! into a `SummaryStore`, for the kinds the operator keeps as summaries), and counts
//! the heap the store holds afterwards with a counting global allocator. Run against a cluster
//! at rest (`TUSK_SCALE_CACHE_MEMORY=1 scripts/bench-scale.sh` runs it before the deletes):
//!   KUBECONFIG=… tusk-cache-memory [--clusters N]
//! Prints one row per kind: objects, heap bytes per object, and the total, scaled to N clusters
//! (default: as listed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Debug;
use std::sync::atomic::{AtomicIsize, Ordering};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tusk::crd::{Backup, PostgreSQL};
use tusk::runtime::compact::compact_cronjob;
use tusk::runtime::database_pods::DatabasePod;
use tusk::runtime::packed::Packed;
use tusk::runtime::secret_facts::SecretFacts;
use tusk::runtime::statefulset_summary::StatefulSetSummary;
use tusk::runtime::summaries::{Summary, SummaryStore, summary_store};
use tusk::runtime::watch::drop_managed_fields;

/// Bytes allocated and not freed, by everything in this process.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: delegates every call to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MANAGED: &str = "app.kubernetes.io/managed-by=tusk-operator";
const DATABASE_PODS: &str =
    "app.kubernetes.io/managed-by=tusk-operator,app.kubernetes.io/component=database";

/// One kind's figures: heap held by its cache with the managed fields dropped only (`plain`),
/// and as the operator caches it (the same for kinds it does not compact further).
struct Row {
    kind: &'static str,
    objects: usize,
    plain: isize,
    compact: isize,
}

/// Lists `api` with `selector` in pages of 100, handing each object to `each`, one page held
/// at a time (as the operator's watches list).
async fn for_each_listed<K>(
    api: &Api<K>,
    selector: Option<&str>,
    mut each: impl FnMut(K),
) -> Result<(), Box<dyn std::error::Error>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let mut params = ListParams::default().limit(100);
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    loop {
        let page = api.list(&params).await?;
        let next = page.metadata.continue_.clone();
        page.items.into_iter().for_each(&mut each);
        match next.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Lists `api` with `selector`, compacts every object with `compact` and keeps it in a store:
/// the heap that store holds once the lists are gone.
async fn measure<K>(
    api: Api<K>,
    selector: Option<&str>,
    compact: fn(&mut K),
) -> Result<(usize, isize, Store<K>), Box<dyn std::error::Error>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, mut writer) = reflector::store::<K>();
    let before = LIVE.load(Ordering::Relaxed);
    let mut objects = 0;
    writer.apply_watcher_event(&watcher::Event::Init);
    for_each_listed(&api, selector, |mut object| {
        compact(&mut object);
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
        objects += 1;
    })
    .await?;
    writer.apply_watcher_event(&watcher::Event::InitDone);
    drop(writer);
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    Ok((objects, bytes, store))
}

/// As [`measure`], for the kinds the operator keeps in a [`SummaryStore`].
async fn measure_summarized<K, V: Summary<K> + PartialEq>(
    api: Api<K>,
    selector: Option<&str>,
) -> Result<(usize, isize, SummaryStore<K, V>), Box<dyn std::error::Error>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let (store, mut writer) = summary_store::<K, V>();
    let before = LIVE.load(Ordering::Relaxed);
    writer.apply(watcher::Event::Init);
    for_each_listed(&api, selector, |object| {
        writer.apply(watcher::Event::InitApply(object));
    })
    .await?;
    writer.apply(watcher::Event::InitDone);
    drop(writer);
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    Ok((store.len(), bytes, store))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let scale_to = args
        .iter()
        .position(|a| a == "--clusters")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse::<usize>())
        .transpose()?;
    let client = Client::try_default().await?;
    let all = |c: &Client| c.clone();
    let mut rows = Vec::new();
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    // The compaction of each kind is the operator's (runtime::context's owned_children! list,
    // drop_managed_fields for the kinds kept whole): keep the two in step.
    // One row: the heap with the managed fields dropped only, then as `$cached` keeps it.
    macro_rules! row {
        ($name:literal, $k:ty, $selector:expr, $cached:expr) => {{
            let (_, plain, store) = measure(
                Api::<$k>::all(all(&client)),
                $selector,
                drop_managed_fields::<$k>,
            )
            .await?;
            drop(store);
            let (objects, compact, store) = $cached.await?;
            keep.push(Box::new(store));
            rows.push(Row {
                kind: $name,
                objects,
                plain,
                compact,
            });
        }};
    }
    macro_rules! kind {
        ($name:literal, $k:ty, $selector:expr, $compact:expr) => {
            row!(
                $name,
                $k,
                $selector,
                measure(Api::<$k>::all(all(&client)), $selector, $compact)
            )
        };
    }
    // Kinds the operator keeps as summaries (runtime::context's `summarized` list).
    macro_rules! summarized {
        ($name:literal, $k:ty, $summary:ty) => {
            summarized!($name, $k, $summary, MANAGED)
        };
        ($name:literal, $k:ty, $summary:ty, $selector:expr) => {
            row!(
                $name,
                $k,
                Some($selector),
                measure_summarized::<$k, $summary>(Api::<$k>::all(all(&client)), Some($selector))
            )
        };
    }
    kind!(
        "PostgreSQL",
        PostgreSQL,
        None,
        drop_managed_fields::<PostgreSQL>
    );
    summarized!("Secret", Secret, SecretFacts);
    summarized!("ConfigMap", ConfigMap, Packed);
    summarized!("Service", Service, Packed);
    summarized!("StatefulSet", StatefulSet, StatefulSetSummary);
    kind!("CronJob", CronJob, Some(MANAGED), compact_cronjob);
    summarized!("ServiceAccount", ServiceAccount, Packed);
    summarized!("Role", Role, Packed);
    summarized!("RoleBinding", RoleBinding, Packed);
    summarized!("PodDisruptionBudget", PodDisruptionBudget, Packed);
    summarized!("Pod (database)", Pod, DatabasePod, DATABASE_PODS);
    kind!("Job", Job, Some(MANAGED), drop_managed_fields::<Job>);
    kind!("Backup", Backup, None, drop_managed_fields::<Backup>);
    let clusters = rows.first().map_or(0, |r| r.objects);
    let factor = |bytes: isize| match (scale_to, clusters) {
        (Some(n), c) if c > 0 => bytes as f64 * n as f64 / c as f64,
        _ => bytes as f64,
    };
    let mib = |bytes: f64| bytes / (1024.0 * 1024.0);
    println!(
        "| kind | objects | heap per object, managed fields dropped / as cached | heap, {} \
         clusters, managed fields dropped / as cached |",
        scale_to.unwrap_or(clusters)
    );
    println!("|---|---|---|---|");
    let (mut plain_total, mut total) = (0.0, 0.0);
    for row in &rows {
        let per = |bytes: isize| bytes.checked_div(row.objects as isize).unwrap_or(0);
        let (plain, compact) = (factor(row.plain), factor(row.compact));
        plain_total += plain;
        total += compact;
        println!(
            "| {} | {} | {} / {} B | {:.1} / {:.1} MiB |",
            row.kind,
            row.objects,
            per(row.plain),
            per(row.compact),
            mib(plain),
            mib(compact)
        );
    }
    println!(
        "| all caches | | | {:.1} / {:.1} MiB |",
        mib(plain_total),
        mib(total)
    );
    drop(keep);
    Ok(())
}
