//! `kubectl tusk backup NAME [--physical] [--wait]`: creates a Backup of the cluster and, with `--wait`,
//! follows it through a watch (no polling) printing a line per phase change.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tusk::crd::{Backup, BackupMethod, BackupPhase};

use crate::cluster::get_postgresql;
use crate::error::{Error, Result};

/// `<cluster>-<UTC yyyymmddhhmmss>`: unique per second, at most 45 + 15 characters (under the
/// 63 a Backup name may have).
pub fn default_name(cluster: &str, now: Timestamp) -> String {
    format!("{cluster}-{}", now.strftime("%Y%m%d%H%M%S"))
}

/// The progress line for `backup` in its current state.
pub fn progress_line(backup: &Backup) -> String {
    let name = backup.name_any();
    let status = backup.status.clone().unwrap_or_default();
    match backup.phase() {
        BackupPhase::Pending => format!("Backup {name}: Pending"),
        BackupPhase::Running => format!(
            "Backup {name}: Running (Job {})",
            status.job.as_deref().unwrap_or("?")
        ),
        BackupPhase::Completed => format!(
            "Backup {name}: Completed, {} at {}",
            status
                .size_bytes
                .map_or_else(|| "size unknown".to_owned(), crate::format::size),
            status.location.as_deref().unwrap_or("?")
        ),
        BackupPhase::Failed => format!(
            "Backup {name}: Failed: {}",
            status.error.as_deref().unwrap_or("no reason given")
        ),
    }
}

/// Creates Backup `backup` (default name when `None`) of `namespace/cluster` by `method`;
/// returns its name.
pub async fn create(
    client: &Client,
    namespace: &str,
    cluster: &str,
    backup: Option<String>,
    method: BackupMethod,
) -> Result<String> {
    // A Backup of a cluster that does not exist would stay Pending: refuse it here.
    get_postgresql(client, namespace, cluster).await?;
    let name = backup.unwrap_or_else(|| default_name(cluster, Timestamp::now()));
    let api: Api<Backup> = Api::namespaced(client.clone(), namespace);
    let mut created = Backup::of_cluster(&name, namespace, cluster);
    created.spec.method = method;
    api.create(&PostParams::default(), &created)
        .await
        .map_err(Error::kube(format!("creating Backup {namespace}/{name}")))?;
    Ok(name)
}

/// Follows Backup `namespace/name` until Completed (Ok) or Failed (Err), printing a line per
/// phase change through `say`; an Err too after `timeout`.
pub async fn follow(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
    mut say: impl FnMut(&str),
) -> Result<()> {
    let api: Api<Backup> = Api::namespaced(client.clone(), namespace);
    let mut last: Option<BackupPhase> = None;
    let watch = async {
        let mut stream = watcher::watch_object(api, name).boxed();
        while let Some(event) = stream.next().await {
            let event =
                event.map_err(|e| Error::Invalid(format!("watching Backup {name}: {e}")))?;
            let Some(backup) = event else {
                return Err(Error::NotFound(format!(
                    "Backup {namespace}/{name} (deleted)"
                )));
            };
            let phase = backup.phase();
            if last != Some(phase) {
                say(&progress_line(&backup));
                last = Some(phase);
            }
            match phase {
                BackupPhase::Completed => return Ok(()),
                BackupPhase::Failed => {
                    return Err(Error::BackupFailed {
                        name: name.to_owned(),
                        message: backup
                            .status
                            .and_then(|s| s.error)
                            .unwrap_or_else(|| "no reason given".to_owned()),
                    });
                }
                BackupPhase::Pending | BackupPhase::Running => {}
            }
        }
        Err(Error::Invalid(format!("the watch of Backup {name} ended")))
    };
    match tokio::time::timeout(timeout, watch).await {
        Ok(result) => result,
        Err(_) => Err(Error::BackupTimeout {
            name: name.to_owned(),
            seconds: timeout.as_secs(),
            phase: last.map_or_else(|| "none seen".to_owned(), |p| format!("{p:?}")),
        }),
    }
}

/// `10m`, `90s`, `1h`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |i| text.split_at(i));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 90s, 10m or 1h"))?;
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("{text:?}: the unit must be s, m or h")),
    };
    Ok(Duration::from_secs(n * factor))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn backup(status: serde_json::Value) -> Backup {
        tusk::crd::fixtures::backup("prod", "shop-1", "shop", status)
    }

    #[test]
    fn a_line_per_phase_says_what_matters_in_it() {
        assert_eq!(progress_line(&backup(json!({}))), "Backup shop-1: Pending");
        assert_eq!(
            progress_line(&backup(json!({"phase": "Running", "job": "shop-1"}))),
            "Backup shop-1: Running (Job shop-1)"
        );
        assert_eq!(
            progress_line(&backup(json!({"phase": "Completed", "sizeBytes": 2048,
                "location": "s3://b/p/prod/shop/shop-1/"}))),
            "Backup shop-1: Completed, 2.0 KiB at s3://b/p/prod/shop/shop-1/"
        );
        assert_eq!(
            progress_line(&backup(
                json!({"phase": "Failed", "error": "pg_dump exited 1"})
            )),
            "Backup shop-1: Failed: pg_dump exited 1"
        );
    }

    #[test]
    fn default_names_are_the_cluster_and_the_utc_second() {
        let now: Timestamp = "2026-11-24T02:03:04Z".parse().unwrap();
        assert_eq!(default_name("shop", now), "shop-20261124020304");
    }

    #[test]
    fn timeouts_take_seconds_minutes_or_hours() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("1d").is_err());
    }
}
