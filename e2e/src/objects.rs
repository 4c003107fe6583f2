//! Kubernetes objects by kind and name (`secret/db-app`), read through their metadata: what
//! the scenarios check for every child of a cluster alike (existence, uid, owner, labels).

use std::fmt;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::core::ApiResource;
use kube::{Api, ResourceExt};

use crate::{Ctx, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Secret,
    ConfigMap,
    Service,
    StatefulSet,
    CronJob,
    Job,
    Pod,
    Pvc,
    NetworkPolicy,
}

impl Kind {
    /// What the operator creates for a cluster (Jobs, pods and claims come from their owners).
    pub const CHILDREN: [Kind; 5] = [
        Kind::Secret,
        Kind::ConfigMap,
        Kind::Service,
        Kind::StatefulSet,
        Kind::CronJob,
    ];

    fn resource(self) -> ApiResource {
        match self {
            Kind::Secret => ApiResource::erase::<Secret>(&()),
            Kind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
            Kind::Service => ApiResource::erase::<Service>(&()),
            Kind::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
            Kind::CronJob => ApiResource::erase::<CronJob>(&()),
            Kind::Job => ApiResource::erase::<Job>(&()),
            Kind::Pod => ApiResource::erase::<Pod>(&()),
            Kind::Pvc => ApiResource::erase::<PersistentVolumeClaim>(&()),
            Kind::NetworkPolicy => ApiResource::erase::<NetworkPolicy>(&()),
        }
    }

    fn word(self) -> &'static str {
        match self {
            Kind::Secret => "secret",
            Kind::ConfigMap => "configmap",
            Kind::Service => "service",
            Kind::StatefulSet => "statefulset",
            Kind::CronJob => "cronjob",
            Kind::Job => "job",
            Kind::Pod => "pod",
            Kind::Pvc => "pvc",
            Kind::NetworkPolicy => "networkpolicy",
        }
    }
}

/// An object of a scenario: kind and name (its namespace is the context's, or given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obj {
    pub kind: Kind,
    pub name: String,
}

impl Obj {
    pub fn new(kind: Kind, name: impl Into<String>) -> Self {
        Obj {
            kind,
            name: name.into(),
        }
    }
}

impl fmt::Display for Obj {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind.word(), self.name)
    }
}

impl Ctx {
    pub fn dynamic_in(&self, ns: &str, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &kind.resource())
    }

    pub async fn get_in(&self, ns: &str, obj: &Obj) -> Result<Option<DynamicObject>> {
        Ok(self.dynamic_in(ns, obj.kind).get_opt(&obj.name).await?)
    }

    /// Key `key` of Secret `name` in the scenario's namespace, as text.
    pub async fn secret_value(&self, name: &str, key: &str) -> Result<String> {
        use crate::Context as _;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let secret = secrets.get(name).await?;
        let value = (secret.data.as_ref())
            .and_then(|d| d.get(key))
            .context(format!("no {key} in Secret {name}"))?;
        Ok(String::from_utf8_lossy(&value.0).into_owned())
    }

    pub async fn get(&self, obj: &Obj) -> Result<Option<DynamicObject>> {
        self.get_in(&self.ns, obj).await
    }

    pub async fn exists(&self, obj: &Obj) -> Result<bool> {
        Ok(self.get(obj).await?.is_some())
    }

    /// The uid, or an empty string when the object does not exist.
    pub async fn uid_in(&self, ns: &str, obj: &Obj) -> Result<String> {
        Ok(self
            .get_in(ns, obj)
            .await?
            .and_then(|o| o.metadata.uid)
            .unwrap_or_default())
    }

    pub async fn delete_in(&self, ns: &str, obj: &Obj) -> Result {
        self.dynamic_in(ns, obj.kind)
            .delete(&obj.name, &DeleteParams::default())
            .await?;
        Ok(())
    }

    /// Objects of these kinds in `ns` matching a label selector, as `kind/name`.
    pub async fn labelled_in(&self, ns: &str, kinds: &[Kind], selector: &str) -> Result<Vec<Obj>> {
        let mut found = Vec::new();
        for &kind in kinds {
            let list = self
                .dynamic_in(ns, kind)
                .list_metadata(&ListParams::default().labels(selector))
                .await?;
            found.extend(list.items.iter().map(|o| Obj::new(kind, o.name_any())));
        }
        Ok(found)
    }
}

/// `kind/name kind/name …` for messages.
pub fn names(objs: &[Obj]) -> String {
    objs.iter()
        .map(Obj::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}
