//! Server-side apply of YAML documents (manifests written in the scenarios, samples/, crds/),
//! strict about unknown fields as `kubectl apply` is.

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::{Api, Client};

use crate::settings::{PostgresImage, SUITE_VERSIONS};
use crate::{Context, Ctx, Failure, Result};

const FIELD_MANAGER: &str = "tusk-e2e";

/// Parses every (non-empty) document of a YAML stream.
pub fn documents(yaml: &str) -> Result<Vec<serde_json::Value>> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_str_multiple(yaml).context("parsing YAML")?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Points a PostgreSQL written for one of the suite's majors at `postgres` instead (its image
/// and major); any other document, or a PostgreSQL with another version (an invalid spec, say),
/// is left as written.
pub fn with_postgres(doc: &mut serde_json::Value, postgres: &PostgresImage) {
    let suite_version = SUITE_VERSIONS.iter().any(|v| doc["spec"]["version"] == *v);
    if doc["kind"] != "PostgreSQL" || !suite_version {
        return;
    }
    doc["spec"]["version"] = postgres.version.clone().into();
    if doc["spec"]["image"].is_null() {
        doc["spec"]["image"] = postgres.image.clone().into();
    }
    if let Some(pooler) = &postgres.pooler
        && doc["spec"]["pooler"].is_object()
        && doc["spec"]["pooler"]["image"].is_null()
    {
        doc["spec"]["pooler"]["image"] = pooler.clone().into();
    }
}

/// Applies each document; namespaced ones without a namespace go into `ns`. Returns
/// `Kind/name` of each. The API server's rejection comes back as the failure's message.
pub async fn apply_yaml(
    client: &Client,
    ns: Option<&str>,
    yaml: &str,
    postgres: Option<&PostgresImage>,
) -> Result<Vec<(String, String)>> {
    let mut docs = documents(yaml)?;
    if let Some(postgres) = postgres {
        docs.iter_mut().for_each(|doc| with_postgres(doc, postgres));
    }
    apply_documents(client, ns, docs, false).await
}

/// As [`apply_yaml`], as a server-side dry run (`kubectl apply --dry-run=server`): validated
/// and admitted by the API server (schema, CEL rules), nothing stored. Every namespaced
/// document goes into `ns`, whatever namespace it names.
pub async fn dry_run_yaml(client: &Client, ns: &str, yaml: &str) -> Result<Vec<(String, String)>> {
    let mut docs = documents(yaml)?;
    for doc in &mut docs {
        if let Some(meta) = doc.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("namespace");
        }
    }
    apply_documents(client, Some(ns), docs, true).await
}

async fn apply_documents(
    client: &Client,
    ns: Option<&str>,
    docs: Vec<serde_json::Value>,
    dry_run: bool,
) -> Result<Vec<(String, String)>> {
    let mut applied = Vec::new();
    for doc in docs {
        let mut obj: DynamicObject = serde_json::from_value(doc).context("a Kubernetes object")?;
        let types = obj
            .types
            .clone()
            .context("a document without apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types).context("apiVersion")?;
        let (resource, capabilities) = pinned_kind(client, &gvk)
            .await
            .context(format!("discovering {}", types.kind))?;
        let name = obj
            .metadata
            .name
            .clone()
            .context("a document without metadata.name")?;
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => {
                let namespace = obj
                    .metadata
                    .namespace
                    .clone()
                    .or(ns.map(str::to_string))
                    .context(format!("{}/{name} needs a namespace", types.kind))?;
                obj.metadata.namespace = Some(namespace.clone());
                Api::namespaced_with(client.clone(), &namespace, &resource)
            }
        };
        let mut params = PatchParams::apply(FIELD_MANAGER)
            .force()
            .validation_strict();
        params.dry_run = dry_run;
        api.patch(&name, &params, &Patch::Apply(&obj))
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) => Failure::Fail(status.message),
                other => Failure::from(other),
            })?;
        applied.push((types.kind, name));
    }
    Ok(applied)
}

impl Ctx {
    /// Applies YAML into the scenario's namespace.
    pub async fn apply(&self, yaml: &str) -> Result<Vec<(String, String)>> {
        self.apply_in(&self.ns, yaml).await
    }

    /// [`Self::apply`] with the newer major's image (`Settings::postgres_next`) in place of the
    /// suite's: a cluster written for `"17"` runs that major wherever the official image cannot
    /// be pulled, and the official image where it can.
    pub async fn apply_next_major(&self, yaml: &str) -> Result<Vec<(String, String)>> {
        apply_yaml(
            &self.client,
            Some(&self.ns),
            yaml,
            self.settings.postgres_next.as_ref(),
        )
        .await
    }

    pub async fn apply_in(&self, ns: &str, yaml: &str) -> Result<Vec<(String, String)>> {
        apply_yaml(
            &self.client,
            Some(ns),
            yaml,
            self.settings.postgres.as_ref(),
        )
        .await
    }

    /// A merge patch of a cluster's spec (or anything else of it), as `kubectl patch --type=merge`.
    pub async fn merge_patch_postgresql_in(
        &self,
        ns: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> Result {
        self.postgresqls_in(ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) => Failure::Fail(status.message),
                other => Failure::from(other),
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stand_in() -> PostgresImage {
        PostgresImage {
            image: "localhost/tusk-test/postgres:15".into(),
            version: "15".into(),
            pooler: None,
        }
    }

    #[test]
    fn a_cluster_of_the_suites_major_runs_the_stand_in() {
        let mut doc = serde_json::json!({"kind": "PostgreSQL", "spec": {"version": "18"}});
        with_postgres(&mut doc, &stand_in());
        assert_eq!(doc["spec"]["version"], "15");
        assert_eq!(doc["spec"]["image"], "localhost/tusk-test/postgres:15");
    }

    #[test]
    fn other_versions_and_kinds_are_left_as_written() {
        let invalid = serde_json::json!({"kind": "PostgreSQL", "spec": {"version": "9.6"}});
        let secret = serde_json::json!({"kind": "Secret", "spec": {"version": "18"}});
        for original in [invalid, secret] {
            let mut doc = original.clone();
            with_postgres(&mut doc, &stand_in());
            assert_eq!(doc, original);
        }
    }
}
