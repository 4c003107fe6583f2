//! Verifications of backups (a restore into a throwaway server, then checks): asking for one,
//! and waiting for the proof a schedule produces.

use kube::api::{Patch, PatchParams};
use serde_json::json;
use tusk::crd::{Verification, VerificationPhase};

use crate::wait::{Check, until};
use crate::{Ctx, Result, ensure};

impl Ctx {
    /// Asks Backup `name` (in the scenario's namespace) for a verification with `request` (the
    /// `tusk.dev/verify` annotation) and waits for its answer.
    pub async fn verify_backup(&self, name: &str, request: &str) -> Result<Verification> {
        let backups = self.backups_in(&self.ns);
        let patch = json!({"metadata": {"annotations": {"tusk.dev/verify": request}}});
        backups
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        until(
            format!("Backup {}/{name} verification {request} finished", self.ns),
            self.timeout(),
            || async {
                let verification = backups.get(name).await?.status.and_then(|s| s.verification);
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

    /// Waits for cluster `ns/cluster` to report `BackupVerified=True` (its `spec.backup.verify`
    /// schedule ran) with Backup `backup` as `lastVerifiedBackup`; returns that Backup's proof.
    pub async fn wait_backup_verified_in(
        &self,
        ns: &str,
        cluster: &str,
        backup: &str,
    ) -> Result<Verification> {
        self.wait_condition_in(ns, cluster, "BackupVerified", "True")
            .await?;
        let status = self.postgresql_in(ns, cluster).await?.status;
        let last = status.and_then(|s| s.last_verified_backup).map(|b| b.name);
        ensure!(
            last.as_deref() == Some(backup),
            "{ns}/{cluster} lastVerifiedBackup is {last:?}, want {backup}"
        );
        let proof = self.backups_in(ns).get(backup).await?.status;
        Ok(proof.and_then(|s| s.verification).unwrap_or_default())
    }
}

/// Fails unless `v` passed having counted exactly the seed ([`crate::sql::SEED_TABLES`] tables,
/// [`crate::sql::SEED_ROWS`] rows: the database was seeded with `Ctx::seed` and nothing else).
pub fn passed_with_seed(v: &Verification) -> Result<String> {
    let counted = passed_with_counts(v)?;
    let seed = (crate::sql::SEED_TABLES, crate::sql::SEED_ROWS);
    ensure!(
        (v.tables, v.rows) == (Some(seed.0), Some(seed.1)),
        "the verification counted {counted}, not the seed's {} tables and {} rows",
        seed.0,
        seed.1
    );
    Ok(counted)
}

/// Fails unless `v` passed with tables and rows counted; says what it counted.
pub fn passed_with_counts(v: &Verification) -> Result<String> {
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
