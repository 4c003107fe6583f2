//! The online upgrade's mechanism (`tusk_instance::upgrade`) across real pods and majors: a
//! cluster on PostgreSQL 15 under a writer, copied into a cluster on 17 through logical
//! replication, then the cut-over — every acknowledged row on 17. The operator does not drive
//! an upgrade yet; this proves what it will drive, on the images and the network it will use.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use tusk_e2e::replication::{Writer, pod_sql, service_ip};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};
use tusk_instance::upgrade::{Direct, Server, conninfo_value, slot_name, source, target};

/// The newest PostgreSQL client programs on the host.
fn host_bin_dir() -> Result<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .context("PostgreSQL client programs under /usr/lib/postgresql")?
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("pg_dump").exists())
        .collect();
    found.sort();
    found.pop().context("no pg_dump under /usr/lib/postgresql")
}

/// A one-instance cluster of `version`, one of the suite's majors (the real node swaps in its
/// stand-ins: 15 for "18", 17 for "17" applied as the newer major).
fn spec(name: &str, version: &str, extra: &str) -> String {
    format!(
        "apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {{name: {name}}}
spec:
  version: \"{version}\"
  instances: 1
  storage: {{size: 1Gi}}
  superuserAccess: true
{extra}"
    )
}

/// The superuser's way to `cluster` from the host: its `-rw` address, verified by the CA its
/// ConfigMap publishes (written to `dir`).
async fn from_host(ctx: &Ctx, cluster: &str, dir: &std::path::Path) -> Result<Server> {
    let ip = service_ip(ctx, &format!("{cluster}-rw")).await?;
    let password = superuser_password(ctx, cluster).await?;
    let maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let ca = (maps.get(&format!("{cluster}-ca.crt")).await?.data)
        .and_then(|mut d| d.remove("ca.crt"))
        .context("ca.crt published")?;
    let ca_file = dir.join(format!("{cluster}-ca.crt"));
    std::fs::write(&ca_file, ca)?;
    Ok(Server {
        conninfo: format!(
            "host={ip} port=5432 user=postgres password={} sslmode=verify-ca sslrootcert={}",
            conninfo_value(&password),
            conninfo_value(&ca_file.display().to_string())
        ),
        bin_dir: Some(host_bin_dir()?),
    })
}

async fn superuser_password(ctx: &Ctx, cluster: &str) -> Result<String> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let secret = secrets.get(&format!("{cluster}-superuser")).await?;
    let password = (secret.data.and_then(|mut d| d.remove("password")))
        .context("password in the superuser Secret")?;
    Ok(String::from_utf8(password.0)?)
}

#[scenario]
async fn upgrade_mechanism_carries_a_written_database_from_15_to_17(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let parameters = "  parameters: {wal_level: logical}\n";
    ctx.apply(&spec("old", "18", parameters)).await?;
    ctx.apply_next_major(&spec("new", "17", "")).await?;
    ctx.wait_ready(&["old", "new"]).await?;
    let (old, new) = (
        pod_sql(&ctx, "old-0", "SHOW server_version_num").await?,
        pod_sql(&ctx, "new-0", "SHOW server_version_num").await?,
    );
    ensure!(
        old.starts_with("15") && new.starts_with("17"),
        "old-0 runs {old}, new-0 {new}: not 15 and 17"
    );
    let scratch = tempfile::tempdir()?;
    let (from, to) = (
        from_host(&ctx, "old", scratch.path()).await?,
        from_host(&ctx, "new", scratch.path()).await?,
    );
    // As the new side's server reaches the old one (its own connection, from its pod). The
    // clusters have different CAs here, so it only requires TLS; within one cluster being
    // upgraded the pods trust the cluster's CA and present the upgrade role's certificate.
    let for_subscriber = Server {
        conninfo: format!(
            "host=old-rw.{}.svc port=5432 user=postgres password={} sslmode=require",
            ctx.ns,
            conninfo_value(&superuser_password(&ctx, "old").await?)
        ),
        bin_dir: None,
    };

    let writer = Writer::start(&ctx, "old").await?;
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let started = Instant::now();
    let databases = source::databases(&Direct, &from).await?;
    source::publish(&Direct, &from, &databases).await?;
    target::copy_roles(&Direct, &from, &to, scratch.path()).await?;
    for db in &databases {
        target::copy_schema(&Direct, &from, &to, db, scratch.path()).await?;
        target::subscribe(&Direct, &from, &for_subscriber, &to, db).await?;
    }
    until("every table copied to 17", ctx.timeout(), || async {
        let mut states = Vec::new();
        for db in &databases {
            states.push(target::progress(&Direct, &to, &db.name).await?);
        }
        let done = states.iter().all(|(done, all)| done == all);
        Ok(Check::when(done, format!("{states:?}")))
    })
    .await?;
    let copied = started.elapsed();

    let cut = Instant::now();
    let lsn = source::freeze(&Direct, &from).await?;
    let slots: Vec<String> = databases.iter().map(|d| slot_name(d.oid)).collect();
    until(
        "17 to confirm the final position",
        Duration::from_secs(60),
        || async {
            let confirmed = source::confirmed(&Direct, &from, &slots, &lsn).await?;
            Ok(Check::when(confirmed, format!("not yet past {lsn}")))
        },
    )
    .await?;
    for db in &databases {
        target::carry_sequences(&Direct, &from, &to, &db.name).await?;
        target::finish(&Direct, &to, &db.name).await?;
    }
    let cut = cut.elapsed();
    let acks = writer.stop();
    let present = pod_sql(&ctx, "new-0", "SELECT string_agg(n::text, ',') FROM writes").await?;
    let present: Vec<i64> = present.split(',').filter_map(|n| n.parse().ok()).collect();
    let lost: Vec<i64> = (acks.iter().map(|a| a.n))
        .filter(|n| !present.contains(n))
        .collect();
    ensure!(lost.is_empty(), "acknowledged rows missing on 17: {lost:?}");
    ensure!(!acks.is_empty(), "the writer wrote");
    say(format!(
        "15 -> 17 across pods: {} databases copied in {:.1}s under a writer; cut-over (read-only, \
         final position confirmed, sequences, detached) {:.2}s; {} acknowledged rows, 0 lost",
        databases.len(),
        copied.as_secs_f64(),
        cut.as_secs_f64(),
        acks.len()
    ));
    source::unpublish(&Direct, &from, &databases, None).await?;
    source::thaw(&Direct, &from).await?;
    Ok(())
}
