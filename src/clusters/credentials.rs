//! The cluster's Secrets, applied first: its CA and server certificate, then the credentials
//! clients use, which carry that CA. Passwords are created once and never changed; what a
//! client needs to verify the server follows every new server certificate.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use tracing::info;

use super::desired::Desired;
use crate::crd::PostgreSQL;
use crate::error::{Error, Result};
use crate::resources::ca_rotation::{self, CaState};
use crate::resources::{self, Cluster, brought_tls, tls};
use crate::runtime::Context;
use crate::runtime::apply::{Change, Written, apply, create};
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
    let mut ca = server.as_ref().and_then(server_ca);
    for secret in &desired.credentials {
        let change = ensure_credentials(cluster, ctx, &api, secret, &mut ca).await?;
        writes.extend(Written::of(secret, change));
    }
    for secret in [&desired.replication, &desired.monitoring] {
        let change = ensure_secret(&api, ctx, cluster.namespace, secret).await?;
        writes.extend(Written::of(secret, change));
    }
    Ok(writes)
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
/// certificate once known (written or read by this reconcile).
async fn ensure_credentials(
    cluster: &Cluster<'_>,
    ctx: &Context,
    api: &Api<Secret>,
    desired: &Secret,
    ca: &mut Option<String>,
) -> Result<Change> {
    let (ns, name) = (cluster.namespace, desired.name_any());
    let wanted = match ca.as_deref() {
        Some(ca) => Some(tls::ca_fingerprint(ca)),
        None => ctx
            .caches
            .secrets
            .get(ns, &cluster.server_tls_secret_name())
            .and_then(|server| tls::recorded_ca(&server).map(str::to_owned)),
    };
    let carries =
        |secret: &Secret| wanted.is_some() && tls::recorded_ca(secret) == wanted.as_deref();
    if let Some(cached) = ctx.caches.secrets.get(ns, &name)
        && (carries(&cached) || !ours(&cached, cluster))
    {
        return Ok(Change::Unchanged);
    }
    // The cache can lag behind the API server; a read protects an existing password.
    let stored = api.get_opt(&name).await.map_err(read_error(&name))?;
    match &stored {
        Some(stored) if carries(stored) || !ours(stored, cluster) => return Ok(Change::Unchanged),
        _ => {}
    }
    if ca.is_none() {
        let server_name = cluster.server_tls_secret_name();
        let server = api
            .get_opt(&server_name)
            .await
            .map_err(read_error(&server_name))?;
        *ca = server.as_ref().and_then(server_ca);
    }
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
    // What a server Secret needs: not due for renewal, and made with the CA bundle stored now
    // (a CA issued anew while the server's rewrite failed must still reach the server).
    let current = |server: &Secret, ca_fingerprint: Option<&str>| {
        !tls::server_renewal_due(server, now, lifetimes)
            && ca_fingerprint.is_some()
            && tls::recorded_ca(server) == ca_fingerprint
    };
    let cached_server = ctx.caches.secrets.get(ns, &server_name);
    let cached_ca = ctx.caches.secrets.get(ns, &ca_name);
    if let (Some(server), Some(ca)) = (&cached_server, &cached_ca)
        && current(server, tls::recorded_ca(ca))
        && !ca_rotation::step_due(ca, now)
    {
        return Ok((Vec::new(), None));
    }
    // The cache can lag behind the API server: reads decide what is really missing.
    let read = |name: String| async move {
        let error = read_error(&name);
        api.get_opt(&name).await.map_err(error)
    };
    let server = match cached_server {
        Some(secret) => Some(secret),
        None => read(server_name).await?,
    };
    let mut writes = Vec::new();
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
    let validity = tls::Validity::leaf(now, lifetimes, ca.signer_not_after(cluster)?);
    let issued = tls::ServerCertificates {
        server: tls::issue_server(cluster, &ctx.cluster_domain, &ca.signer, validity)?,
        replication: tls::issue_replication(cluster, &ca.signer, validity)?,
    };
    let secret = tls::server_secret(cluster, &issued, &ca.bundle(), validity.until);
    // A renewal (or a new CA, or a rotation step) replaces the Secret's files in place; the
    // instance managers reload PostgreSQL when they change, no pod restarts.
    let change = if server.is_some() {
        apply(api, None, secret.clone()).await?;
        Change::Updated
    } else {
        create(api, &secret).await?
    };
    writes.extend(Written::of(&secret, change));
    let written = (change != Change::Unchanged).then_some(secret);
    Ok((writes, written))
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
    let name = secret.name_any();
    if ctx.caches.secrets.get(namespace, &name).is_some() {
        return Ok(Change::Unchanged);
    }
    // The cache can lag behind the API server; a read protects an existing password.
    if api
        .get_opt(&name)
        .await
        .map_err(read_error(&name))?
        .is_some()
    {
        return Ok(Change::Unchanged);
    }
    // Created by a concurrent reconcile between our read and write: keep theirs.
    create(api, secret).await
}
