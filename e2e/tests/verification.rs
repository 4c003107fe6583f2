//! L4: verification of a real backup by the Job the operator generates (`backup-agent
//! verify-restore` into a throwaway server), requested with `tusk.dev/verify`.

use kube::api::{Patch, PatchParams};
use serde_json::json;
use tusk::crd::{Verification, VerificationPhase};
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

/// A verification of a fresh backup passes with its counts; after one bit of its dump is
/// flipped in the bucket, a second request ends Failed naming `checksums`.
#[scenario]
async fn l4_verification_passes_then_names_an_altered_dump(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let (ns, name) = (ctx.ns.clone(), "src");
    ctx.backed_up_lifecycle_db(name).await?;
    let passed = verify(&ctx, name, "e2e-1").await?;
    say(format!(
        "Backup {name} Verified: {}",
        passed_with_counts(&passed)?
    ));
    ctx.alter_app_dump_in(&ns, name).await?;
    let failed = verify(&ctx, name, "e2e-2").await?;
    ensure!(
        failed.phase == Some(VerificationPhase::Failed)
            && failed.failed_check.as_deref() == Some("checksums"),
        "the verification of an altered dump did not fail naming checksums: {failed:?}"
    );
    say(format!(
        "altered dump: Verified=False, {}",
        failed.message.unwrap_or_default()
    ));
    Ok(())
}

/// `spec.backup.verify` on a cluster with a Completed backup: the first scheduled verification
/// runs at once, passes with the backup's counts, and the cluster reports it
/// (`lastVerifiedBackup`, `BackupVerified=True`).
#[scenario]
async fn l4_scheduled_verification_proves_the_newest_backup(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let (ns, name) = (ctx.ns.clone(), "nightly");
    ctx.backed_up_lifecycle_db(name).await?;
    let verify = json!({"spec": {"backup": {"verify": {"schedule": "0 4 * * 0", "window": "8d"}}}});
    ctx.merge_patch_postgresql_in(&ns, "db", verify).await?;
    ctx.wait_condition_in(&ns, "db", "BackupVerified", "True")
        .await?;
    let status = ctx
        .postgresql_in(&ns, "db")
        .await?
        .status
        .unwrap_or_default();
    let last = status.last_verified_backup.map(|b| b.name);
    ensure!(
        last.as_deref() == Some(name),
        "lastVerifiedBackup is {last:?}"
    );
    let backup = ctx.backups_in(&ns).get(name).await?;
    let proof = backup
        .status
        .and_then(|s| s.verification)
        .unwrap_or_default();
    say(format!(
        "scheduled verification of {name}: {}; BackupVerified=True",
        passed_with_counts(&proof)?
    ));
    Ok(())
}

/// Fails unless `v` passed with tables and rows counted; says what it counted.
fn passed_with_counts(v: &Verification) -> Result<String> {
    let (tables, rows) = (v.tables.unwrap_or_default(), v.rows.unwrap_or_default());
    ensure!(
        v.phase == Some(VerificationPhase::Passed) && tables > 0 && rows > 0,
        "the verification did not pass with counts: {v:?}"
    );
    Ok(format!(
        "Passed, {tables} tables, {rows} rows in {:?}s",
        v.duration_seconds
    ))
}

/// Asks Backup `name` for a verification with `request` and waits for its answer.
async fn verify(ctx: &Ctx, name: &str, request: &str) -> Result<Verification> {
    let backups = ctx.backups_in(&ctx.ns);
    let patch = json!({"metadata": {"annotations": {"tusk.dev/verify": request}}});
    backups
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    until(
        format!("Backup {}/{name} verification {request} finished", ctx.ns),
        ctx.timeout(),
        || async {
            let backup = backups.get(name).await?;
            let verification = backup.status.and_then(|s| s.verification);
            Ok(match verification {
                Some(v)
                    if v.request.as_deref() == Some(request)
                        && v.phase != Some(VerificationPhase::Running) =>
                {
                    Check::Done(v)
                }
                other => Check::Pending(format!("{other:?}")),
            })
        },
    )
    .await
}
