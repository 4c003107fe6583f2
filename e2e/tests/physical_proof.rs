//! Physical backups proven on real pods (the short version of the process-level proofs in
//! `backup-agent/tests/verify_physical.rs` and `instance/tests/continuity.rs`): two instances
//! archiving into the in-cluster MinIO; a physical Backup verified by the Job the operator
//! makes (restore, replay to the primary's restore point, `pg_verifybackup`, amcheck, every
//! table's count equal to the one recorded there); the continuity check after each base backup
//! (read from a replica, as by default), whole, and again after a switchover, across both
//! timelines (no false alarm); then one archived segment of the new timeline deleted from the
//! bucket, and the next check (asked for as the operator does) names it
//! (`ContinuousArchiving=False`, `ArchiveBroken`).

use tusk::crd::PostgreSQL;
use tusk_e2e::bucket::Damage;
use tusk_e2e::faults::{ask_archive_check, instance_status, rejoined};
use tusk_e2e::manifests::{archiving, physical_backup};
use tusk_e2e::switchover::{request_switchover, switched_over};
use tusk_e2e::verification::passed_with_counts;
use tusk_e2e::{Check, Ctx, Result, ensure, fail, say, scenario, until};

/// The cluster's `ContinuousArchiving` condition: (status, reason, message).
fn archiving_condition(pg: &PostgreSQL) -> Option<(String, String, String)> {
    let conditions = &pg.status.as_ref()?.conditions;
    let c = conditions
        .iter()
        .find(|c| c.type_ == "ContinuousArchiving")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until the `ContinuousArchiving` condition satisfies `want` (given its status, reason
/// and message); its message.
async fn archiving_until(
    ctx: &Ctx,
    name: &str,
    what: &str,
    want: impl Fn(&str, &str, &str) -> bool,
) -> Result<String> {
    until(format!("{name}: {what}"), ctx.timeout(), || async {
        let pg = ctx.postgresql_in(&ctx.ns, name).await?;
        Ok(match archiving_condition(&pg) {
            Some((status, reason, message)) if want(&status, &reason, &message) => {
                Check::Done(message)
            }
            other => Check::Pending(format!("{other:?}")),
        })
    })
    .await
}

/// A whole archive whose check reached timeline `timeline` (the condition names the span).
fn whole_to(timeline: &str) -> impl Fn(&str, &str, &str) -> bool + '_ {
    move |status, _, message| {
        status == "True"
            && message.contains("was in the archive")
            && message
                .rsplit_once(" to ")
                .is_some_and(|(_, last)| last.starts_with(timeline))
    }
}

/// Takes physical Backup `backup` of `cluster` and waits until it is Completed.
async fn take_physical(ctx: &Ctx, cluster: &str, backup: &str) -> Result {
    ctx.apply(&physical_backup(backup, cluster)).await?;
    ctx.wait_backup_condition_in(&ctx.ns, backup, "Completed")
        .await
}

/// Waits until the continuity check of `primary`'s manager counts `n` base backups (it ran
/// after the n-th: the operator asks for it once the Backup is Completed, since a base backup
/// read from a standby leaves the primary no backup history file); fails on a false alarm (a
/// missing segment or history file, a foreign file); what it found.
async fn checked_after(ctx: &Ctx, primary: &str, n: u64) -> Result<String> {
    let check = until(
        format!("{primary}'s continuity check counting {n} base backups"),
        ctx.timeout(),
        || async {
            let status = instance_status(ctx, primary).await?;
            let check = status.archive.and_then(|a| a.continuity);
            Ok(match check {
                Some(c) if c.base_backups >= n => Check::Done(c),
                other => Check::Pending(format!("{other:?}")),
            })
        },
    )
    .await?;
    ensure!(
        check.missing_count == 0 && check.missing_history.is_empty() && check.foreign.is_empty(),
        "{primary}'s continuity check after base backup {n} names a break: {check:?}"
    );
    Ok(format!(
        "{} segments from {} to {}, 0 missing, timelines {:?}",
        check.segments,
        check.first_segment.unwrap_or_default(),
        check.last_segment.unwrap_or_default(),
        check.timelines
    ))
}

#[scenario]
async fn physical_backup_verified_and_archive_continuity_on_real_pods(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    ctx.require_l4_bucket()?;
    let name = "arch";
    let (first, second) = (format!("{name}-0"), format!("{name}-1"));
    ctx.apply(&archiving(name, 2, &ctx.settings.s3_endpoint))
        .await?;
    ctx.wait_ready(&[name]).await?;
    ctx.wait_sql(name).await?;
    ctx.seed(name, "app", "app").await?;

    // Read from the replica; the primary writes its restore point with counts, then checks.
    take_physical(&ctx, name, "base-1").await?;
    let checked = checked_after(&ctx, &first, 1).await?;
    let proof = ctx.verify_backup("base-1", "e2e-1").await?;
    let counted = passed_with_counts(&proof)?;
    let counts = proof.checks.iter().find(|c| c.name == "counts");
    ensure!(
        counts.is_some_and(|c| c.result == "passed"),
        "the counts at the primary's restore point were not compared: {counts:?}"
    );
    say(format!(
        "physical Backup base-1 (from the replica) Verified: {counted}, counts equal at the \
         restore point; the check after it: {checked}"
    ));
    archiving_until(&ctx, name, "the archive whole", whole_to("00000001")).await?;

    request_switchover(&ctx, name, &second).await?;
    switched_over(&ctx, name, &second).await?;
    rejoined(&ctx, &first).await?;
    take_physical(&ctx, name, "base-2").await?;
    let checked = checked_after(&ctx, &second, 2).await?;
    let whole = archiving_until(
        &ctx,
        name,
        "the archive whole across both timelines",
        whole_to("00000002"),
    )
    .await?;
    say(format!(
        "after a switchover to {second} and base-2, no false alarm: {checked}; {whole}"
    ));

    // One archived segment of timeline 2 (the new primary's own: nothing heals it) goes.
    let keys = ctx.prefix_keys_in("pitr", &ctx.ns, name).await?;
    let Some(key) = keys
        .iter()
        .filter(|k| k.contains("/wal/") && k.contains("/00000002/") && k.ends_with(".zst"))
        .min()
    else {
        fail!(
            "no archived segment of timeline 2 among {} keys",
            keys.len()
        );
    };
    let segment = key
        .rsplit('/')
        .next()
        .and_then(|file| file.strip_suffix(".zst"))
        .unwrap_or_default()
        .to_owned();
    ctx.damage_object(key, Damage::Delete).await?;
    // The check the operator asks for after a base backup (a new base backup itself would wait
    // for that segment: it begins at the replica's last restartpoint, in that very segment).
    ask_archive_check(&ctx, &second).await?;
    let named = until(
        format!("{second} naming {segment}"),
        ctx.timeout(),
        || async {
            let status = instance_status(&ctx, &second).await?;
            let check = status.archive.and_then(|a| a.continuity);
            Ok(match check {
                Some(c) if c.missing.contains(&segment) => Check::Done(c.missing),
                other => Check::Pending(format!("{other:?}")),
            })
        },
    )
    .await?;
    ensure!(
        named == [segment.clone()],
        "the check named {named:?}, not {segment} alone"
    );
    // The condition follows at the cluster's next reconcile (the 10-minute resync at the
    // latest; the manager's Warning Event and metric are immediate): one is brought on by a
    // spec change that changes nothing (5 s is the default archive timeout).
    let touch = serde_json::json!({"spec": {"backup": {"walArchive": {"timeoutSeconds": 5}}}});
    ctx.merge_patch_postgresql_in(&ctx.ns, name, touch).await?;
    let broken = archiving_until(
        &ctx,
        name,
        &format!("{segment} named missing"),
        |s, r, m| s == "False" && r == "ArchiveBroken" && m.contains(&segment),
    )
    .await?;
    say(format!("{segment} deleted from the bucket: {broken}"));
    Ok(())
}
