//! The cluster's Secrets, applied first: its CA and server certificate, then the credentials
//! clients use, which carry that CA. Passwords are created once and never changed by the operator
//! (a changed one is followed: `declared_passwords`); what a
//! client needs to verify the server follows every new server certificate.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use tracing::info;

use super::declared_passwords::ensure_verifiers;
use super::desired::Desired;
use crate::crd::PostgreSQL;
use crate::error::{Error, Result};
use crate::resources::ca_rotation::{self, CaState};
use crate::resources::verifiers::Slot;
use crate::resources::{self, Cluster, brought_tls, pooler_tls, tls, upgrade_tls};
use crate::runtime::Context;
use crate::runtime::apply::{Change, Written, apply, apply_json, create};
use crate::runtime::watch::owning_cluster;

/// The CA certificate the server Secret carries, which the credentials copy.
fn server_ca(server: &Secret) -> Option<String> {
    let ca_cert = server.data.as_ref()?.get(tls::CA_CRT)?;
    String::from_utf8(ca_cert.0.clone()).ok()
}

/// Applies the certificates, then the credentials Secrets (each made with the CA), then the
/// replication role's Secret (no CA: the pods mount the server Secret's) and the status token.
pub async fn apply_secrets(
    cluster: &Cluster<'_>,
    desired: &Desired,
    ctx: &Context,
) -> Result<Vec<Written>> {
    // Before any Secret the spec names is read or mounted: none may be Tusk's (the cache holds
    // every Secret Tusk generated, so this costs no request).
    let tusks = |name: &str| {
        let secret = ctx.caches.secrets.get(cluster.namespace, name)?;
        Some(owning_cluster(&secret).map(|owner| owner.name))
    };
    resources::borrowed(&resources::named_secrets(cluster.spec), tusks)?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), cluster.namespace);
    let (mut writes, server) = ensure_certificates(cluster, ctx, &api).await?;
    // The CA clients trust: from the server Secret when this reconcile wrote or read it.
    let ca = server.as_ref().and_then(server_ca);
    // Independent of each other, so sent together: a new cluster's four Secrets take one round
    // trip, not four.
    let api_ref = &api;
    let ca_ref = ca.as_deref();
    let credentials = desired.credentials.iter().map(|secret| async move {
        let change = ensure_credentials(cluster, ctx, api_ref, secret, ca_ref).await?;
        Ok::<_, Error>((secret, change))
    });
    let internal = [&desired.replication, &desired.monitoring].map(|secret| async {
        let change = ensure_secret(&api, ctx, cluster.namespace, secret).await?;
        Ok::<_, Error>(Written::of(secret, change))
    });
    let (credentials, internal, published) = futures::try_join!(
        futures::future::try_join_all(credentials),
        futures::future::try_join_all(internal),
        ensure_published_ca(cluster, ctx, &api, ca.as_deref()),
    )?;
    // The passwords of credentials just created, for their verifiers without a read.
    let created: Vec<(Slot, String)> = Slot::ALL
        .into_iter()
        .filter_map(|slot| {
            let (secret, _) = credentials.iter().find(|(secret, change)| {
                *change == Change::Created && secret.name_any() == slot.source(cluster)
            })?;
            Some((slot, resources::password_of(secret)?))
        })
        .collect();
    let credentials = credentials
        .into_iter()
        .map(|(s, change)| Written::of(s, change));
    writes.extend(credentials.chain(internal).flatten());
    writes.extend(published);
    // After the credentials: the verifiers are made from their passwords.
    let declared = &desired.credentials;
    writes.extend(ensure_verifiers(cluster, ctx, &api, declared, &created, ca.as_deref()).await?);
    Ok(writes)
}

/// ConfigMap `<name>-ca.crt` with the server Secret's CA bundle, for clients that verify the
/// server and hold no other credential of the cluster. At rest (the cached copy's bundle has
/// the fingerprint the server Secret records) it costs no request.
async fn ensure_published_ca(
    cluster: &Cluster<'_>,
    ctx: &Context,
    secrets: &Api<Secret>,
    ca: Option<&str>,
) -> Result<Option<Written>> {
    let ns = cluster.namespace;
    let cached = ctx.caches.config_maps.get(ns, &cluster.published_ca_name());
    let bundle = match ca {
        Some(ca) => ca.to_owned(),
        None => {
            let server_name = cluster.server_tls_secret_name();
            let recorded = ctx.caches.secrets.get(ns, &server_name);
            let recorded = recorded.as_ref().and_then(tls::recorded_ca);
            let held = cached.as_ref().and_then(resources::published_ca_bundle);
            if recorded.is_some() && held.map(tls::ca_fingerprint).as_deref() == recorded {
                return Ok(None);
            }
            let server = secrets
                .get_opt(&server_name)
                .await
                .map_err(read_error(&server_name))?;
            // No server certificate yet: the reconcile that makes it publishes its CA.
            match server.as_ref().and_then(server_ca) {
                Some(bundle) => bundle,
                None => return Ok(None),
            }
        }
    };
    let desired = resources::published_ca(cluster, &bundle);
    let api = Api::namespaced(ctx.client.clone(), ns);
    let change = apply_json(&api, cached, &desired).await?;
    Ok(Written::of(&desired, change))
}

fn read_error(name: &str) -> impl FnOnce(kube::Error) -> Error {
    let name = name.to_owned();
    move |source| Error::Read {
        kind: "Secret".to_owned(),
        name,
        source,
    }
}

/// Whether `secret` is this cluster's own (a Secret the user brought under the name is not).
fn ours(secret: &Secret, cluster: &Cluster) -> bool {
    let kind = PostgreSQL::kind(&());
    secret
        .owner_references()
        .iter()
        .any(|owner| owner.kind == kind && owner.name == cluster.name)
}

/// A credentials Secret, created with a fresh password when absent; one of ours whose `ca.crt`
/// is not the server Secret's CA is rewritten with the password it holds. The cached copies keep
/// both fingerprints, so a converged cluster reads nothing. `ca` is the server Secret's CA
/// certificate when this reconcile wrote or read it.
async fn ensure_credentials(
    cluster: &Cluster<'_>,
    ctx: &Context,
    api: &Api<Secret>,
    desired: &Secret,
    ca: Option<&str>,
) -> Result<Change> {
    let (ns, name) = (cluster.namespace, desired.name_any());
    let wanted = match ca {
        Some(ca) => Some(tls::ca_fingerprint(ca)),
        None => ctx
            .caches
            .secrets
            .get(ns, &cluster.server_tls_secret_name())
            .and_then(|server| tls::recorded_ca(&server).map(str::to_owned)),
    };
    let carries =
        |secret: &Secret| wanted.is_some() && tls::recorded_ca(secret) == wanted.as_deref();
    let cached = ctx.caches.secrets.get(ns, &name);
    if let Some(cached) = &cached
        && (carries(cached) || !ours(cached, cluster))
    {
        return Ok(Change::Unchanged);
    }
    // Not seen yet, most often a new cluster's: created at once (a create never overwrites a
    // password), read only when it exists after all (the cache lags behind).
    if let (None, Some(ca)) = (&cached, ca) {
        let secret = resources::with_ca(desired, desired, ca).unwrap_or_else(|| desired.clone());
        if create(api, &secret).await? == Change::Created {
            return Ok(Change::Created);
        }
    }
    // The cache can lag behind the API server; a read protects an existing password.
    let stored = api.get_opt(&name).await.map_err(read_error(&name))?;
    match &stored {
        Some(stored) if carries(stored) || !ours(stored, cluster) => return Ok(Change::Unchanged),
        _ => {}
    }
    let ca = match ca {
        Some(ca) => Some(ca.to_owned()),
        None => {
            let server_name = cluster.server_tls_secret_name();
            let server = api
                .get_opt(&server_name)
                .await
                .map_err(read_error(&server_name))?;
            server.as_ref().and_then(server_ca)
        }
    };
    let Some(ca) = ca.as_deref() else {
        // No server certificate yet (another writer is making it): the next reconcile adds it.
        return match stored {
            Some(_) => Ok(Change::Unchanged),
            None => create(api, desired).await,
        };
    };
    match stored {
        Some(stored) => match resources::with_ca(desired, &stored, ca) {
            Some(updated) if tls::recorded_ca(&stored) != tls::recorded_ca(&updated) => {
                apply(api, None, updated).await?;
                Ok(Change::Updated)
            }
            _ => Ok(Change::Unchanged),
        },
        // Created by a concurrent reconcile between our read and write: theirs is kept.
        None => {
            create(
                api,
                &resources::with_ca(desired, desired, ca).unwrap_or_else(|| desired.clone()),
            )
            .await
        }
    }
}

/// The cluster's CA and its server certificate, each in its Secret. Only what is missing or due
/// is made: a missing server certificate is signed by the stored CA (clients that trust it keep
/// trusting the server); a missing CA is issued anew with a server certificate it signs, which
/// replaces the old one. A server certificate due for renewal, or made with another CA bundle
/// than the stored one, is issued again in place; a CA rotation step due is taken
/// ([`ca_rotation`]), one per reconcile.
/// Returns the server Secret when it wrote or read one. With `spec.tls.serverSecret`, nothing is
/// issued: the user's Secret is read (it is not ours, so not cached) and checked.
async fn ensure_certificates(
    cluster: &Cluster<'_>,
    ctx: &Context,
    api: &Api<Secret>,
) -> Result<(Vec<Written>, Option<Secret>)> {
    if let Some(name) = cluster.user_server_secret() {
        let secret = api.get_opt(name).await.map_err(read_error(name))?;
        let secret = secret.ok_or_else(|| tls::TlsError::Absent {
            secret: name.to_owned(),
        })?;
        let names = brought_tls::dialed_names(cluster);
        brought_tls::check(&secret, &names, time::OffsetDateTime::now_utc())?;
        return Ok((Vec::new(), Some(secret)));
    }
    let ns = cluster.namespace;
    let lifetimes = &ctx.certificate_lifetimes;
    let (ca_name, server_name) = (cluster.ca_secret_name(), cluster.server_tls_secret_name());
    let now = time::OffsetDateTime::now_utc();
    // What a server Secret needs: not due for renewal, made with the CA bundle stored now (a CA
    // issued anew while the server's rewrite failed must still reach the server), and with the
    // upgrade certificate (and the new set's names) exactly while an upgrade's new set exists.
    let current = |server: &Secret, ca_fingerprint: Option<&str>| {
        !tls::server_renewal_due(server, now, lifetimes)
            && upgrade_tls::upgrade_certificate_current(cluster, server)
            && ca_fingerprint.is_some()
            && tls::recorded_ca(server) == ca_fingerprint
    };
    let cached_server = ctx.caches.secrets.get(ns, &server_name);
    let cached_ca = ctx.caches.secrets.get(ns, &ca_name);
    // With a pooler, its certificate is issued and renewed with the server's (the cache
    // decides, as for the server's: a missing or stale one issues both again).
    let cached_pooler = cluster.spec.pooler.as_ref().map(|_| {
        ctx.caches
            .secrets
            .get(ns, &cluster.pooler_tls_secret_name())
    });
    let pooler_current = |ca_fingerprint: Option<&str>| match &cached_pooler {
        None => true,
        Some(pooler) => pooler.as_ref().is_some_and(|p| {
            !tls::leaf_renewal_due(p, now, lifetimes)
                && ca_fingerprint.is_some()
                && tls::recorded_ca(p) == ca_fingerprint
        }),
    };
    if let (Some(server), Some(ca)) = (&cached_server, &cached_ca)
        && current(server, tls::recorded_ca(ca))
        && pooler_current(tls::recorded_ca(ca))
        && !ca_rotation::step_due(ca, now)
    {
        return Ok((Vec::new(), None));
    }
    // The cache can lag behind the API server: reads decide what is really missing.
    let read = |name: String| async move {
        let error = read_error(&name);
        api.get_opt(&name).await.map_err(error)
    };
    let mut writes = Vec::new();
    if cached_server.is_none() && cached_ca.is_none() {
        // Neither seen: most often a new cluster, whose CA is created without a read first (a
        // create never overwrites; a CA that exists after all answers 409 and is read below).
        let state = CaState::issue(cluster, now, lifetimes)?;
        let secret = state.secret(cluster);
        if create(api, &secret).await? == Change::Created {
            writes.extend(Written::of(&secret, Change::Created));
            return issue_server(cluster, ctx, api, &state, false, writes).await;
        }
    }
    let server = match cached_server {
        Some(secret) => Some(secret),
        None => read(server_name).await?,
    };
    let ca = match read(ca_name.clone()).await? {
        // A CA Secret Tusk did not make for this cluster is not adopted: whoever made it keeps
        // its key and could sign a server certificate every client trusts (issue 47, low).
        Some(stored) if !ours(&stored, cluster) => {
            return Err(tls::TlsError::ForeignCa { secret: ca_name }.into());
        }
        Some(stored) => {
            let state = CaState::read(&stored, lifetimes)?;
            let state = match state.advance(cluster, now, lifetimes)? {
                Some((stepped, stage)) => {
                    info!(cluster = %cluster.name, namespace = ns, stage = stage.as_str(),
                          next_step = %stepped.next_step, "certificate authority rotation");
                    stepped
                }
                None => state,
            };
            let secret = state.secret(cluster);
            // Written when a step was taken, or to record a schedule or bundle fingerprint a
            // Secret from before them lacks: from then on the cache compares.
            let recorded = |secret: &Secret| {
                let fingerprint = tls::recorded_ca(secret).map(str::to_owned);
                (fingerprint, ca_rotation::recorded_next_step(secret))
            };
            if recorded(&secret) != recorded(&stored) {
                apply(api, None, secret.clone()).await?;
                writes.extend(Written::of(&secret, Change::Updated));
            }
            if server
                .as_ref()
                .is_some_and(|s| current(s, tls::recorded_ca(&secret)))
                && pooler_current(tls::recorded_ca(&secret))
            {
                return Ok((writes, None));
            }
            state
        }
        None => {
            let state = CaState::issue(cluster, now, lifetimes)?;
            let secret = state.secret(cluster);
            let change = create(api, &secret).await?;
            writes.extend(Written::of(&secret, change));
            if change != Change::Created {
                // Another writer stored a CA meanwhile: the next reconcile signs with it.
                return Ok((writes, None));
            }
            state
        }
    };
    issue_server(cluster, ctx, api, &ca, server.is_some(), writes).await
}

/// Issues the server certificate with `ca` and writes it: replaced in place when `exists` (or a
/// create finds it), so that a renewal, a new CA or a rotation step reaches the instance
/// managers, which reload PostgreSQL when the files change, no pod restarts. Returns the writes
/// so far with this one, and the Secret written.
async fn issue_server(
    cluster: &Cluster<'_>,
    ctx: &Context,
    api: &Api<Secret>,
    ca: &CaState,
    exists: bool,
    mut writes: Vec<Written>,
) -> Result<(Vec<Written>, Option<Secret>)> {
    let (now, lifetimes) = (time::OffsetDateTime::now_utc(), &ctx.certificate_lifetimes);
    let validity = tls::Validity::leaf(now, lifetimes, ca.signer_not_after(cluster)?);
    let issued = tls::ServerCertificates {
        server: tls::issue_server(cluster, &ctx.cluster_domain, &ca.signer, validity)?,
        replication: tls::issue_replication(cluster, &ca.signer, validity)?,
        upgrade: upgrade_tls::issue_upgrade(cluster, &ca.signer, validity)?,
    };
    let secret = tls::server_secret(cluster, &issued, &ca.bundle(), validity.until);
    let change = if !exists && create(api, &secret).await? == Change::Created {
        Change::Created
    } else {
        apply(api, None, secret.clone()).await?;
        Change::Updated
    };
    writes.extend(Written::of(&secret, change));
    if cluster.spec.pooler.is_some() {
        let pooler = pooler_tls::issue_pooler(cluster, &ctx.cluster_domain, &ca.signer, validity)?;
        let pooler = pooler_tls::pooler_tls_secret(cluster, &pooler, &ca.bundle(), validity.until);
        apply(api, None, pooler.clone()).await?;
        writes.extend(Written::of(&pooler, Change::Updated));
    }
    Ok((writes, Some(secret)))
}

/// How long until a certificate of the cluster is due (a renewal or a CA rotation step), as the
/// cache knows them; `None` with certificates the user brings or none cached yet. No event marks
/// that moment, so the reconcile asks to be run again then.
pub fn until_certificates_due(cluster: &Cluster<'_>, ctx: &Context) -> Option<std::time::Duration> {
    if cluster.user_server_secret().is_some() {
        return None;
    }
    let ns = cluster.namespace;
    let renewal = ctx
        .caches
        .secrets
        .get(ns, &cluster.server_tls_secret_name())
        .and_then(|server| tls::recorded_not_after(&server))
        .map(|not_after| not_after - ctx.certificate_lifetimes.leaf_renewal());
    let step = ctx
        .caches
        .secrets
        .get(ns, &cluster.ca_secret_name())
        .and_then(|ca| ca_rotation::recorded_next_step(&ca));
    let due = renewal.into_iter().chain(step).min()?;
    let until = due - time::OffsetDateTime::now_utc();
    Some(std::time::Duration::try_from(until).unwrap_or_default())
}

/// The certificate times for the status, as the cache knows them; none with certificates the
/// user brings.
pub fn certificate_times(
    cluster: &Cluster<'_>,
    ctx: &Context,
) -> Option<crate::crd::CertificateTimes> {
    if cluster.user_server_secret().is_some() {
        return None;
    }
    let secrets = &ctx.caches.secrets;
    let server = secrets.get(cluster.namespace, &cluster.server_tls_secret_name());
    let ca = secrets.get(cluster.namespace, &cluster.ca_secret_name());
    ca_rotation::certificate_times(server.as_ref(), ca.as_ref())
}

/// Creates a Secret once. An existing Secret, ours or one the user brought, is never rewritten:
/// the database keeps the password it was initialised with.
async fn ensure_secret(
    api: &Api<Secret>,
    ctx: &Context,
    namespace: &str,
    secret: &Secret,
) -> Result<Change> {
    if ctx
        .caches
        .secrets
        .get(namespace, &secret.name_any())
        .is_some()
    {
        return Ok(Change::Unchanged);
    }
    // Not seen yet: a create never overwrites (an existing Secret, one the cache has not seen
    // yet, answers 409 and is kept), so no read is needed first.
    create(api, secret).await
}
