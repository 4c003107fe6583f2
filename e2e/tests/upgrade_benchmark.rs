//! A major-version upgrade at a user's size (scripts/bench-upgrade.sh): a cluster on real pods
//! loaded with TUSK_UPGRADE_BENCH_GIB GiB (default 1) of rows, a writer through `-rw`, and
//! `spec.version` raised, by TUSK_UPGRADE_BENCH_METHOD (`online`, the default, or `inPlace`).
//! Prints the time in each phase, the writer's longest gap (in place: the downtime), the rows
//! checked and the disk the upgraded primary holds; asserts only that no acknowledged row is
//! lost, never a speed. Skipped unless TUSK_UPGRADE_BENCH_GIB is set.

use std::time::{Duration, Instant};

use tusk::crd::UpgradePhase;
use tusk_e2e::replication::{Writer, current_primary, pod_sql, write_gap};
use tusk_e2e::upgrades::{every_ack_on, major, majors};
use tusk_e2e::{Check, Context, Ctx, Level, Result, absent, ensure, say, scenario, until};

const NAME: &str = "big";
/// Rows of about 1 KiB each (960 characters of payload), inserted this many per statement.
const ROWS_PER_GIB: u64 = 1 << 20;
const BATCH: u64 = 1 << 17;

fn spec(version: &str, gib: u64, method: &str) -> String {
    format!(
        "apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {{name: {NAME}}}
spec:
  version: \"{version}\"
  instances: 2
  storage: {{size: {}Gi}}
  parameters: {{wal_level: logical}}
  upgrade: {{keepOldForSeconds: 30, method: {method}}}
",
        4 * gib + 2
    )
}

/// Bytes of every database and of the WAL on `pod`.
async fn on_disk(ctx: &Ctx, pod: &str) -> Result<(u64, u64)> {
    let sql = "SELECT (SELECT sum(pg_database_size(datname)) FROM pg_database) || ',' || \
               (SELECT sum(size) FROM pg_ls_waldir())";
    let answer = pod_sql(ctx, pod, sql).await?;
    let (data, wal) = answer.split_once(',').context(format!("sizes: {answer}"))?;
    Ok((
        data.parse().context("database sizes")?,
        wal.parse().context("WAL size")?,
    ))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

#[scenario]
async fn upgrade_benchmark(ctx: Ctx) -> Result {
    let Ok(gib) = std::env::var("TUSK_UPGRADE_BENCH_GIB") else {
        return Err(absent(
            Level::Benchmark,
            "set TUSK_UPGRADE_BENCH_GIB (scripts/bench-upgrade.sh)",
        ));
    };
    ctx.require_real_pods()?;
    let gib: u64 = gib.parse().context("TUSK_UPGRADE_BENCH_GIB")?;
    let method = std::env::var("TUSK_UPGRADE_BENCH_METHOD").unwrap_or_else(|_| "online".into());
    ensure!(
        ["online", "inPlace"].contains(&method.as_str()),
        "TUSK_UPGRADE_BENCH_METHOD is {method:?}: online or inPlace"
    );
    let (version, raise) = majors(&ctx);
    ctx.apply(&spec(&version, gib, &method)).await?;
    ctx.wait_ready(&[NAME]).await?;
    let old_primary = current_primary(&ctx, NAME).await?.context("a primary")?;
    let from = major(&ctx, &old_primary).await?;

    let loading = Instant::now();
    pod_sql(
        &ctx,
        &old_primary,
        "CREATE TABLE bulk (id bigint PRIMARY KEY, payload text)",
    )
    .await?;
    let rows = gib * ROWS_PER_GIB;
    for first in (0..rows).step_by(BATCH as usize) {
        let last = (first + BATCH).min(rows);
        let insert = format!(
            "INSERT INTO bulk SELECT g, repeat(md5(g::text), 30) FROM generate_series({}, {last}) g",
            first + 1
        );
        pod_sql(&ctx, &old_primary, &insert).await?;
    }
    pod_sql(&ctx, &old_primary, "CHECKPOINT").await?;
    let (data_before, _) = on_disk(&ctx, &old_primary).await?;
    say(format!(
        "{rows} rows loaded into {from} in {:.0} s: databases {:.0} MiB",
        loading.elapsed().as_secs_f64(),
        mib(data_before)
    ));

    let writer = Writer::start(&ctx, NAME).await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let raised = Instant::now();
    ctx.merge_patch_postgresql_in(&ctx.ns, NAME, serde_json::json!({"spec": raise}))
        .await?;
    // The phases as they pass, polled every 250 ms (a phase shorter than that may be missed).
    let phases = std::sync::Mutex::new(Vec::<(UpgradePhase, Instant)>::new());
    let upgraded = until("the upgrade to end", Duration::from_secs(3600), || async {
        let pg = ctx.postgresql_in(&ctx.ns, NAME).await?;
        let status = pg.status.unwrap_or_default();
        let phase = status.upgrade.as_ref().map(|r| r.phase);
        if let (Some(phase), Ok(mut seen)) = (phase, phases.lock())
            && seen.last().is_none_or(|(last, _)| *last != phase)
        {
            seen.push((phase, Instant::now()));
        }
        let upgraded = (status.conditions.iter())
            .any(|c| c.type_ == "Upgrading" && c.status == "False" && c.reason == "Upgraded");
        Ok(Check::when(
            status.upgrade.is_none() && upgraded,
            format!("{phase:?}"),
        ))
    })
    .await;
    let ended = Instant::now();
    // The writer's longest gap is between two acknowledged rows: in place, the first one after
    // the downtime may come only after the upgrade's end.
    if upgraded.is_ok() {
        writer.wait_ack_after(ended, ctx.timeout()).await?;
    }
    let acks = writer.stop();
    upgraded?;

    let new_primary = current_primary(&ctx, NAME).await?.context("a primary")?;
    let to = major(&ctx, &new_primary).await?;
    ensure!(to != from, "the primary runs {to}, as before the upgrade");
    every_ack_on(&ctx, &new_primary, &acks).await?;
    let copied = pod_sql(&ctx, &new_primary, "SELECT count(*) FROM bulk").await?;
    ensure!(
        copied == rows.to_string(),
        "bulk holds {copied} rows on {to}, not {rows}"
    );
    let (data_after, wal_after) = on_disk(&ctx, &new_primary).await?;
    let phases = phases.into_inner().unwrap_or_default();
    let timeline: Vec<String> = phases
        .iter()
        .enumerate()
        .map(|(i, (phase, at))| {
            let until = phases.get(i + 1).map_or(ended, |(_, next)| *next);
            format!("{phase:?} {:.1} s", until.duration_since(*at).as_secs_f64())
        })
        .collect();
    let gap = write_gap(&acks, raised).unwrap_or_default().as_secs_f64();
    let took = ended.duration_since(raised).as_secs_f64();
    let disk = if method == "online" {
        format!(
            "extra disk per instance of the new set {:.0} MiB ({:.0} MiB databases + {:.0} MiB \
             WAL), for the length of the upgrade and keepOldForSeconds",
            mib(data_after + wal_after),
            mib(data_after),
            mib(wal_after)
        )
    } else {
        format!(
            "no second set: the primary's volume holds {:.0} MiB of databases + {:.0} MiB WAL \
             after (pg_upgrade --link shares the files)",
            mib(data_after),
            mib(wal_after)
        )
    };
    say(format!(
        "{from} -> {to} {method}, {gib} GiB ({:.0} MiB of databases), 2 instances: raised to \
         upgraded {took:.0} s ({}); longest write gap {gap:.2} s; {} acknowledged rows, 0 lost; \
         {disk}",
        mib(data_before),
        timeline.join(", "),
        acks.len(),
    ));
    Ok(())
}
