//! Request sequences more than one scenario expects.

use super::paths::{ANY_SLICE, BACKUPS, CLUSTER, CRONJOBS, JOBS, NIGHTLY_STATUS, RW_SLICE, STATUS};
use super::verifier::Expect;
use super::world::NS;

/// What the `onDelete: Delete` finalizer writes once the bucket is emptied: the CronJob goes
/// first (no new backup may start while the prefix is emptied), then each Backup in `backups`,
/// an Event saying what was deleted, and the patch removing the finalizer.
pub fn delete_finalizer(backups: &[&str]) -> Vec<Expect> {
    let mut script = vec![Expect::delete(format!("{CRONJOBS}/demo-backup"))];
    script.extend(
        backups
            .iter()
            .map(|name| Expect::delete(format!("{BACKUPS}/{name}"))),
    );
    script.push(Expect::event(NS));
    script.push(Expect::patch_cluster(CLUSTER));
    script
}

/// Backup `nightly` starts a Job: the Job is created, the status records it, an Event says so.
pub fn nightly_job_started() -> Vec<Expect> {
    vec![
        Expect::create(JOBS),
        Expect::apply_backup_status(NIGHTLY_STATUS),
        Expect::event(NS),
    ]
}

/// A restore that finished: clients routed first (`-rw`'s and `-r`'s EndpointSlices name the
/// primary), then the status, then the `Restored` and `Ready` Events.
pub fn restore_finished() -> Vec<Expect> {
    vec![
        Expect::apply(RW_SLICE),
        Expect::apply(ANY_SLICE),
        Expect::apply_status(STATUS),
        Expect::event(NS),
        Expect::event(NS),
    ]
}
