//! Declared passwords: the superuser's and the app owner's passwords are what their Secrets
//! say. A password changed in `<name>-superuser` or `<name>-app` becomes a new verifier in
//! `<name>-verifiers` (which the pods mount; the primary's manager makes it the role's password
//! within seconds of the kubelet refreshing the file), and the Secret's URIs and pgpass are
//! rewritten with it. No restart; the old password stops working once the role has the new one.
//!
//! A converged cluster costs nothing: the Secret cache keeps a digest of each password and of
//! the password each verifier was made from, and they agree.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Resource, ResourceExt};

use crate::crd::PostgreSQL;
use crate::error::{Error, Result};
use crate::resources::verifiers::{Slot, password_digest, verifiers_secret};
use crate::resources::{self, Cluster};
use crate::runtime::Context;
use crate::runtime::apply::{Change, Written, apply, create};

/// Keeps `<name>-verifiers` in step with the credentials Secrets; `created` holds the
/// passwords of those this reconcile has just created (known without a read). `desired` are
/// the credentials as built, for the metadata of a rewritten Secret; `ca` the server's CA
/// bundle when this reconcile read it.
pub async fn ensure_verifiers(
    cluster: &Cluster<'_>,
    ctx: &Context,
    api: &Api<Secret>,
    desired: &[Secret],
    created: &[(Slot, String)],
    ca: Option<&str>,
) -> Result<Vec<Written>> {
    let (ns, name) = (cluster.namespace, cluster.verifiers_secret_name());
    let secrets = &ctx.caches.secrets;
    let agreed = |slot: Slot| match secrets.password_digest(ns, &slot.source(cluster)) {
        Some(Some(digest)) => secrets.declared_digest(ns, &name, slot) == Some(digest),
        _ => false,
    };
    if Slot::ALL.into_iter().all(agreed) {
        return Ok(Vec::new());
    }
    // The passwords: known when just created, read otherwise (a Secret the user brought is not
    // cached, so it is read at every reconcile).
    let mut sources = Vec::new();
    for slot in Slot::ALL {
        let known = created.iter().find(|(s, _)| *s == slot);
        let stored = match known {
            Some(_) => None,
            None => read(api, &slot.source(cluster)).await?,
        };
        let password = match (known, &stored) {
            (Some((_, password)), _) => password.clone(),
            (None, Some(stored)) => match resources::password_of(stored) {
                Some(password) => password,
                // No password yet: the next reconcile declares it.
                None => return Ok(Vec::new()),
            },
            (None, None) => return Ok(Vec::new()),
        };
        sources.push((slot, password, stored));
    }
    let passwords: Vec<(Slot, &str)> = sources
        .iter()
        .map(|(slot, password, _)| (*slot, password.as_str()))
        .collect();
    let wanted = verifiers_secret(cluster, &passwords);
    let mut writes = Vec::new();
    // A new cluster's: created at once (the cache has not seen it yet).
    let cached = secrets.get(ns, &name);
    if cached.is_none() && create(api, &wanted).await? == Change::Created {
        writes.extend(Written::of(&wanted, Change::Created));
        return Ok(writes);
    }
    // The cache can lag behind: a verifier is made again only for a password it was not made
    // from (a new salt would change every role's verifier for nothing).
    let stored = read(api, &name).await?;
    let recorded = |slot: Slot| {
        let annotations = stored.as_ref()?.metadata.annotations.as_ref()?;
        annotations.get(slot.annotation()).cloned()
    };
    let changed: Vec<Slot> = passwords
        .iter()
        .filter(|(slot, password)| recorded(*slot) != Some(password_digest(password.as_bytes())))
        .map(|(slot, _)| *slot)
        .collect();
    if changed.is_empty() {
        return Ok(writes);
    }
    apply(api, None, wanted.clone()).await?;
    writes.extend(Written::of(&wanted, Change::Updated));
    // Each changed credentials Secret of ours carries the password in its URIs and pgpass too.
    for (slot, _, stored) in &sources {
        let (Some(stored), true) = (stored, changed.contains(slot)) else {
            continue;
        };
        if let Some(written) = rewrite_connection(cluster, api, desired, stored, ca).await? {
            writes.push(written);
        }
    }
    Ok(writes)
}

/// `stored` (a credentials Secret of ours) with its URIs and pgpass made from its password.
async fn rewrite_connection(
    cluster: &Cluster<'_>,
    api: &Api<Secret>,
    desired: &[Secret],
    stored: &Secret,
    ca: Option<&str>,
) -> Result<Option<Written>> {
    let kind = PostgreSQL::kind(&());
    let ours = stored
        .owner_references()
        .iter()
        .any(|owner| owner.kind == kind && owner.name == cluster.name);
    let Some(desired) = desired.iter().find(|d| d.name_any() == stored.name_any()) else {
        return Ok(None);
    };
    if !ours {
        return Ok(None);
    }
    let ca = match ca {
        Some(ca) => Some(ca.to_owned()),
        None => read(api, &cluster.server_tls_secret_name())
            .await?
            .and_then(|server| server.data?.remove(resources::tls::CA_CRT))
            .and_then(|ca| String::from_utf8(ca.0).ok()),
    };
    let Some(rewritten) = ca.and_then(|ca| resources::with_ca(desired, stored, &ca)) else {
        return Ok(None);
    };
    if rewritten.data == stored.data {
        return Ok(None);
    }
    apply(api, None, rewritten.clone()).await?;
    Ok(Written::of(&rewritten, Change::Updated))
}

async fn read(api: &Api<Secret>, name: &str) -> Result<Option<Secret>> {
    api.get_opt(name).await.map_err(|source| Error::Read {
        kind: "Secret".to_owned(),
        name: name.to_owned(),
        source,
    })
}
