//! `kubectl tusk promote NAME INSTANCE [--wait]`: a planned switchover. Sets the
//! `tusk.dev/switchover-to` annotation the operator acts on (docs/src/design/replication.md); with
//! `--wait`, follows the cluster until INSTANCE is its primary, or the operator has dropped the
//! request (refused or abandoned: its Event says why).

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tusk::crd::PostgreSQL;

use crate::cluster::get_postgresql;
use crate::error::{Error, Result};
use crate::restore::FIELD_MANAGER;

/// The annotation that requests a switchover.
pub use tusk::resources::SWITCHOVER_ANNOTATION;

/// The pod INSTANCE names: `demo-1`, or just its ordinal `1`; one of the cluster's instances.
pub fn target_pod(cluster: &str, instance: &str, instances: i32) -> Result<String> {
    let ordinal = instance
        .strip_prefix(cluster)
        .and_then(|rest| rest.strip_prefix('-'))
        .unwrap_or(instance);
    match ordinal.parse::<i32>() {
        Ok(n) if (0..instances).contains(&n) => Ok(format!("{cluster}-{n}")),
        _ => Err(Error::Invalid(format!(
            "{instance} is not an instance of {cluster}: give {cluster}-N or N, N from 0 to {}",
            instances - 1
        ))),
    }
}

/// Requests the switchover of `namespace/name` to INSTANCE; the target pod's name.
pub async fn request(
    client: &Client,
    namespace: &str,
    name: &str,
    instance: &str,
) -> Result<String> {
    let pg = get_postgresql(client, namespace, name).await?;
    let target = target_pod(name, instance, pg.spec.instances)?;
    let current = pg.status.as_ref().and_then(|s| s.current_primary.clone());
    if current.as_deref() == Some(target.as_str()) {
        return Err(Error::Invalid(format!(
            "{target} is already the primary of {name}"
        )));
    }
    let patch = serde_json::json!({"metadata": {"annotations": {SWITCHOVER_ANNOTATION: target}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let api: Api<PostgreSQL> = Api::namespaced(client.clone(), namespace);
    api.patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!(
            "annotating PostgreSQL {namespace}/{name}"
        )))?;
    Ok(target)
}

/// Where a requested switchover stands, from the cluster as last seen.
#[derive(Debug, PartialEq)]
pub enum Progress {
    Pending,
    Done,
    /// The request is gone and `target` is not the primary.
    Dropped {
        primary: Option<String>,
    },
}

pub fn progress(pg: &PostgreSQL, target: &str) -> Progress {
    let requested = pg.annotations().contains_key(SWITCHOVER_ANNOTATION);
    let primary = pg.status.as_ref().and_then(|s| s.current_primary.clone());
    match (requested, primary) {
        (false, Some(primary)) if primary == target => Progress::Done,
        (true, _) => Progress::Pending,
        (false, primary) => Progress::Dropped { primary },
    }
}

/// Follows `namespace/name` until the switchover to `target` is done (Ok) or dropped (Err).
pub async fn follow(
    client: &Client,
    namespace: &str,
    name: &str,
    target: &str,
    timeout: Duration,
) -> Result<()> {
    let api: Api<PostgreSQL> = Api::namespaced(client.clone(), namespace);
    let watch = async {
        let mut stream = watcher::watch_object(api, name).boxed();
        while let Some(event) = stream.next().await {
            let event =
                event.map_err(|e| Error::Invalid(format!("watching PostgreSQL {name}: {e}")))?;
            let pg = event.ok_or_else(|| {
                Error::NotFound(format!("PostgreSQL {namespace}/{name} (deleted)"))
            })?;
            match progress(&pg, target) {
                Progress::Pending => {}
                Progress::Done => return Ok(()),
                Progress::Dropped { primary } => {
                    return Err(Error::Invalid(format!(
                        "the operator refused or abandoned the switchover to {target} (primary: \
                         {}); its SwitchoverRejected/SwitchoverAborted Event says why: kubectl \
                         events -n {namespace} --for postgresql/{name}",
                        primary.as_deref().unwrap_or("none")
                    )));
                }
            }
        }
        Err(Error::Invalid(format!(
            "the watch of PostgreSQL {name} ended"
        )))
    };
    tokio::time::timeout(timeout, watch)
        .await
        .unwrap_or_else(|_| {
            Err(Error::Invalid(format!(
                "{target} is not the primary of {name} after {}s",
                timeout.as_secs()
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_named_by_its_pod_or_its_ordinal() {
        assert_eq!(target_pod("demo", "demo-2", 3).unwrap(), "demo-2");
        assert_eq!(target_pod("demo", "1", 3).unwrap(), "demo-1");
        for bad in ["demo-3", "3", "-1", "other-1", "demo-x", ""] {
            let err = target_pod("demo", bad, 3).unwrap_err().to_string();
            assert!(err.contains("N from 0 to 2"), "{bad}: {err}");
        }
    }

    fn cluster(requested: bool, primary: &str) -> PostgreSQL {
        let mut annotations = serde_json::Map::new();
        if requested {
            annotations.insert(SWITCHOVER_ANNOTATION.into(), "demo-1".into());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
            "metadata": {"name": "demo", "annotations": annotations},
            "spec": {"instances": 3, "storage": {"size": "1Gi"}},
            "status": {"currentPrimary": primary},
        }))
        .unwrap()
    }

    #[test]
    fn a_switchover_is_done_when_the_request_is_gone_and_the_target_is_primary() {
        assert_eq!(
            progress(&cluster(true, "demo-0"), "demo-1"),
            Progress::Pending
        );
        // The status can say demo-1 before the request's removal is seen: still pending.
        assert_eq!(
            progress(&cluster(true, "demo-1"), "demo-1"),
            Progress::Pending
        );
        assert_eq!(
            progress(&cluster(false, "demo-1"), "demo-1"),
            Progress::Done
        );
        assert_eq!(
            progress(&cluster(false, "demo-0"), "demo-1"),
            Progress::Dropped {
                primary: Some("demo-0".into())
            }
        );
    }
}
