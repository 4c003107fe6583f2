//! GCS backups through the operator (L4: the real backup-agent runs every Job), against
//! fake-gcs-server behind a gateway that checks the service-account key (tusk-testkit): the
//! whole lifecycle works with the key from the cluster's Secret, and a wrong key fails with a
//! credentials error. Objects are asserted on the emulator itself, not through the operator.

use tusk::crd::BackupPhase;
use tusk_e2e::gcs::{self, BUCKET, PATH};
use tusk_e2e::manifests::{backup, restored_cluster};
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

/// Backup Completed (twice), keep 1 deleting the older one's objects, a restore into a new
/// cluster with equal data, and `onDelete: Delete` emptying the prefix: every call to the
/// store authenticated with the Secret's key (tokens issued for it, nothing refused).
// A multi-threaded runtime: the gateway serves the operator and the agents from this process.
#[scenario(multi_thread)]
async fn gcs_lifecycle(ctx: Ctx) -> Result {
    let gcs = ctx.start_gcs().await?;
    let (ns, first, second) = (ctx.ns.clone(), "g1", "g2");
    ctx.create_key_secret_in(&ns, "gcs-key", gcs.key_json())
        .await?;
    ctx.apply(&gcs::cluster("db", 1, "Delete", "gcs-key"))
        .await?;
    ctx.wait_ready(&["db"]).await?;
    ctx.wait_sql("db").await?;
    ctx.seed("db", "app", "app").await?;

    ctx.take_backup_in(&ns, "db", first).await?;
    let took = ctx.take_backup_in(&ns, "db", second).await?;
    let took = took.as_secs_f64();
    say(format!(
        "Backups {first}, {second} Completed ({second}: {took:.1}s)"
    ));
    let location = ctx
        .backups_in(&ns)
        .get(second)
        .await?
        .status
        .and_then(|s| s.location);
    let want = format!("gs://{BUCKET}/{PATH}/{ns}/db/{second}/");
    ensure!(
        location.as_deref() == Some(want.as_str()),
        "location of {second}: {location:?}"
    );

    ctx.wait_backup_gone_in(&ns, first, "retention").await?;
    let keys = ctx.gcs_keys(&gcs, &ns, "db").await?;
    let of = |id: &str| {
        keys.iter()
            .filter(|k| k.contains(&format!("/{id}/")))
            .count()
    };
    ensure!(
        of(first) == 0,
        "{first}'s objects are still there: {keys:?}"
    );
    ensure!(
        keys.iter()
            .any(|k| k.ends_with(&format!("/{second}/manifest.json"))),
        "the newest backup {second} is gone: {keys:?}"
    );
    say(format!(
        "keep: 1 deleted {first}; {} object(s) of {second} remain",
        of(second)
    ));
    // Two agents (one per backup) and the operator (manifests, retention) each got a token.
    let after_backups = gcs.gateway.verified();
    let counters = gcs.counters();
    ensure!(
        after_backups >= 3,
        "no tokens for 2 agents and the operator: {counters}"
    );

    ctx.apply(&restored_cluster("copy", second)).await?;
    ctx.wait_condition_in(&ns, "copy", "Restored", "True")
        .await?;
    ctx.wait_ready(&["copy"]).await?;
    ctx.wait_sql("copy").await?;
    ctx.assert_same_data("db", "copy", "app").await?;
    let counters = gcs.counters();
    ensure!(
        gcs.gateway.verified() > after_backups,
        "no token for the restore: {counters}"
    );

    ctx.delete_postgresql_and_wait_in(&ns, "db").await?;
    let left = ctx.gcs_keys(&gcs, &ns, "db").await?;
    ensure!(left.is_empty(), "{PATH}/{ns}/db/ still holds: {left:?}");
    ensure!(
        ctx.postgresqls_in(&ns).get_opt("db").await?.is_none(),
        "{ns}/db is still there"
    );
    say(format!(
        "onDelete: Delete emptied {PATH}/{ns}/db/ and released the cluster"
    ));

    let counters = gcs.counters();
    let refused = gcs.gateway.refused() + gcs.gateway.rejected();
    ensure!(refused == 0, "something went without the key: {counters}");
    say(format!("gateway: {counters}"));
    Ok(())
}

/// A Secret holding another key (same account, a signature the token endpoint does not accept):
/// the Backup fails, naming the credentials, and nothing reaches the bucket.
#[scenario(multi_thread)]
async fn gcs_wrong_key_fails(ctx: Ctx) -> Result {
    let gcs = ctx.start_gcs().await?;
    let (ns, name) = (ctx.ns.clone(), "w1");
    let wrong = gcs.wrong_key();
    ctx.create_key_secret_in(&ns, "gcs-key", &wrong.json)
        .await?;
    ctx.apply(&gcs::cluster("db", 5, "Retain", "gcs-key"))
        .await?;
    ctx.wait_ready(&["db"]).await?;
    ctx.wait_sql("db").await?;
    ctx.apply(&backup(name, "db")).await?;
    let error = until(
        format!("Backup {ns}/{name} to fail"),
        ctx.timeout(),
        || async {
            let b = ctx.backups_in(&ns).get(name).await?;
            let phase = b.phase();
            Ok(match phase {
                BackupPhase::Failed => {
                    Check::Done(b.status.and_then(|s| s.error).unwrap_or_default())
                }
                BackupPhase::Completed => {
                    Check::Done(format!("Completed with a wrong key: {:?}", b.status))
                }
                _ => Check::Pending(format!("{phase:?}")),
            })
        },
    )
    .await?;
    ensure!(
        error.contains("credentials rejected or missing"),
        "the Backup's error does not name the credentials: {error}"
    );
    ensure!(
        gcs.gateway.rejected() >= 1 && gcs.gateway.verified() == 0,
        "the token endpoint did not refuse the wrong key: {}",
        gcs.counters()
    );
    let keys = ctx.gcs_keys(&gcs, &ns, "db").await?;
    ensure!(
        keys.is_empty(),
        "objects written with a wrong key: {keys:?}"
    );
    say(format!("Backup {name} Failed: {error}"));
    say(format!("gateway: {}", gcs.counters()));
    Ok(())
}
