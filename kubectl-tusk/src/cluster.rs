//! What every command reads about one cluster: the PostgreSQL, its Backups, its labelled
//! children and the Events about them. The operator labels every child with
//! `tusk.dev/cluster=<name>`, so one selector finds them all.

use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client, Resource, ResourceExt};
use tusk::crd::{Backup, PostgreSQL};
use tusk::resources::CLUSTER_LABEL;

use crate::error::{Error, Result};

/// Selector of every child of `cluster`.
pub fn children_selector(cluster: &str) -> ListParams {
    ListParams::default().labels(&format!("{CLUSTER_LABEL}={cluster}"))
}

/// Selector of the database pods of `cluster` (not its Job pods).
pub fn database_pods_selector(cluster: &str) -> ListParams {
    ListParams::default().labels(&format!(
        "{CLUSTER_LABEL}={cluster},app.kubernetes.io/component=database"
    ))
}

/// Selector of the pooler pods of `cluster` (`spec.pooler`), read-only ones included.
pub fn pooler_pods_selector(cluster: &str) -> ListParams {
    ListParams::default().labels(&format!(
        "{CLUSTER_LABEL}={cluster},app.kubernetes.io/component in (pooler,pooler-ro)"
    ))
}

/// The PostgreSQL `namespace/name`, or a "not found" that names it.
pub async fn get_postgresql(client: &Client, namespace: &str, name: &str) -> Result<PostgreSQL> {
    let api: Api<PostgreSQL> = Api::namespaced(client.clone(), namespace);
    api.get_opt(name)
        .await
        .map_err(Error::kube(format!(
            "reading PostgreSQL {namespace}/{name}"
        )))?
        .ok_or_else(|| Error::NotFound(format!("PostgreSQL {namespace}/{name}")))
}

/// Every object of kind `K` in `namespace` matching `params`.
pub async fn list<K>(client: &Client, namespace: &str, params: &ListParams) -> Result<Vec<K>>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    Ok(api
        .list(params)
        .await
        .map_err(Error::kube(format!("listing {kind}s in {namespace}")))?
        .items)
}

/// The Backups of `cluster`, newest first.
pub async fn backups_of(client: &Client, namespace: &str, cluster: &str) -> Result<Vec<Backup>> {
    let mut backups: Vec<Backup> = list::<Backup>(client, namespace, &ListParams::default())
        .await?
        .into_iter()
        .filter(|b| b.spec.cluster.name == cluster)
        .collect();
    backups.sort_by_key(|b| std::cmp::Reverse(b.creation_timestamp()));
    Ok(backups)
}

/// Whether `event` is about `cluster`, one of its children (named `<cluster>-…`) or one of
/// `backups` (which may be named anything).
pub fn is_about(event: &Event, cluster: &str, backups: &[String]) -> bool {
    let Some(name) = event.involved_object.name.as_deref() else {
        return false;
    };
    name == cluster
        || name
            .strip_prefix(cluster)
            .is_some_and(|rest| rest.starts_with('-'))
        || backups.iter().any(|b| b == name)
}

/// The Events of `namespace` about `cluster` and its `backups` (see [`is_about`]), newest last.
pub async fn events_about(
    client: &Client,
    namespace: &str,
    cluster: &str,
    backups: &[Backup],
) -> Result<Vec<Event>> {
    let names: Vec<String> = backups.iter().map(|b| b.name_any()).collect();
    let mut events: Vec<Event> = list::<Event>(client, namespace, &ListParams::default())
        .await?
        .into_iter()
        .filter(|e| is_about(e, cluster, &names))
        .collect();
    events.sort_by_key(event_time);
    Ok(events)
}

/// When an Event last happened: core Events carry `lastTimestamp`, those written through
/// events.k8s.io only `eventTime` (or a series), so take the first that is set.
pub fn event_time(event: &Event) -> Option<k8s_openapi::jiff::Timestamp> {
    event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
        .or_else(|| event.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;

    use super::*;

    fn event_on(name: &str) -> Event {
        Event {
            involved_object: ObjectReference {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn events_about_the_cluster_its_children_and_backups_only() {
        let backups = vec!["nightly-1".to_string()];
        assert!(is_about(&event_on("shop"), "shop", &backups));
        assert!(is_about(&event_on("shop-0"), "shop", &backups));
        assert!(is_about(&event_on("nightly-1"), "shop", &backups));
        assert!(!is_about(&event_on("shopping-0"), "shop", &backups));
        assert!(!is_about(&event_on("other"), "shop", &backups));
    }
}
