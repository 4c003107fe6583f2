//! L4: verification of a real backup by the Job the operator generates (`backup-agent
//! verify-restore` into a throwaway server), requested with `tusk.dev/verify` or scheduled by
//! `spec.backup.verify`.

use serde_json::json;
use tusk::crd::VerificationPhase;
use tusk_e2e::bucket::{APP_DUMP, Damage, MANIFEST};
use tusk_e2e::verification::passed_with_seed;
use tusk_e2e::{Ctx, Result, ensure, say, scenario};

/// A verification of a fresh backup passes with its counts. Then three broken backups, each
/// damaged in the bucket after it completed, end Failed naming the check that caught them:
/// one bit of the dump flipped (`checksums`), the dump of a database gone (`databases`), and a
/// manifest recording one row more than the dump holds, every checksum valid (`counts`).
#[scenario]
async fn l4_verification_passes_then_names_each_broken_backup(ctx: Ctx) -> Result {
    ctx.require_l4_bucket()?;
    let ns = ctx.ns.clone();
    ctx.backed_up_lifecycle_db("src").await?;
    let passed = ctx.verify_backup("src", "e2e-1").await?;
    say(format!(
        "Backup src Verified: {}",
        passed_with_seed(&passed)?
    ));
    let broken = [
        ("altered", APP_DUMP, Damage::FlipBit, "checksums"),
        ("partial", APP_DUMP, Damage::Delete, "databases"),
        (
            "miscounted",
            MANIFEST,
            Damage::Miscount { table: "orders" },
            "counts",
        ),
    ];
    for (backup, file, damage, check) in broken {
        ctx.take_backup_in(&ns, "db", backup).await?;
        ctx.damage_backup_in(&ns, backup, file, damage).await?;
        let failed = ctx.verify_backup(backup, "e2e-1").await?;
        ensure!(
            failed.phase == Some(VerificationPhase::Failed)
                && failed.failed_check.as_deref() == Some(check),
            "the verification of the {backup} backup did not fail naming {check}: {failed:?}"
        );
        say(format!(
            "{backup} backup ({damage:?}): Verified=False, {}",
            failed.message.unwrap_or_default()
        ));
    }
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
    let proof = ctx.wait_backup_verified_in(&ns, "db", name).await?;
    say(format!(
        "scheduled verification of {name}: {}; BackupVerified=True",
        passed_with_seed(&proof)?
    ));
    Ok(())
}
