//! Reads instance managers' `/status` over the pod network: TLS verified against the cluster's
//! CA and by the pod's name (a reused pod IP or a spoofed answer cannot feed a failover
//! decision), with the cluster's status token. What that takes per cluster (the CA from the
//! server Secret, the token from `<cluster>-monitoring`) is read from the API when first
//! needed and remembered a few minutes; a refused handshake or token forgets it, so a rotated
//! CA or a replaced token is read again by the next report.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::http::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use super::instances::{InstanceAddress, StatusSource, UpgradeAnswer, UpgradeRequest};
use crate::resources::{STATUS_TOKEN_KEY, tls};
use tusk_contract::InstanceStatus;

/// One second: an instance that cannot answer that fast is not a promotion candidate.
const TIMEOUT: Duration = Duration::from_secs(1);
/// An upgrade's step runs SQL before it answers (a freeze waits for the server's reload, an
/// unpublish for walsenders to exit): longer, and still bounded.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a cluster's CA and token are used before being read again.
const ACCESS_TTL: Duration = Duration::from_secs(300);
/// Clusters remembered at most (the ones failing over, switching or archiving); more start
/// the memory afresh, so it stays bounded at any number of clusters.
const REMEMBERED: usize = 256;

/// What admits the operator to one cluster's managers.
struct Access {
    tls: TlsConnector,
    /// The fingerprint of the `ca.crt` `tls` trusts.
    ca_fingerprint: String,
    token: String,
    read_at: Instant,
}

/// Why a report was not had: only a refusal by TLS or by token forgets the cluster's access.
enum Failure {
    Refused,
    Unanswered,
}

pub struct InstanceReader {
    client: kube::Client,
    port: u16,
    access: Mutex<HashMap<(String, String), Arc<Access>>>,
}

/// A TLS connector trusting only the CA certificates in PEM `pem`.
fn connector(pem: &[u8]) -> Option<TlsConnector> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert.ok()?).ok()?;
    }
    if roots.is_empty() {
        return None;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Some(TlsConnector::from(Arc::new(config)))
}

fn value(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    Some(secret.data.as_ref()?.get(key)?.0.clone())
}

impl InstanceReader {
    pub fn new(client: kube::Client, port: u16) -> Self {
        Self {
            client,
            port,
            access: Mutex::default(),
        }
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Access>>> {
        self.access.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cluster's CA and token: remembered, or read from its Secrets.
    async fn access(&self, address: &InstanceAddress) -> Option<Arc<Access>> {
        let key = (address.namespace.clone(), address.cluster.clone());
        if let Some(access) = self.remembered().get(&key)
            && access.read_at.elapsed() < ACCESS_TTL
            && address
                .ca_fingerprint
                .as_ref()
                .is_none_or(|known| *known == access.ca_fingerprint)
        {
            return Some(access.clone());
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &address.namespace);
        let (server, monitoring) = futures::join!(
            api.get(&address.server_secret),
            api.get(&address.token_secret)
        );
        let (server, monitoring) = match (server, monitoring) {
            (Ok(server), Ok(monitoring)) => (server, monitoring),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(namespace = %address.namespace, cluster = %address.cluster, error = %e, "cannot read what the instance managers' status port needs");
                return None;
            }
        };
        let ca = value(&server, "ca.crt").unwrap_or_default();
        let ca_fingerprint = tls::ca_fingerprint(&String::from_utf8_lossy(&ca));
        let tls = connector(&ca);
        let token = value(&monitoring, STATUS_TOKEN_KEY).and_then(|t| String::from_utf8(t).ok());
        let (Some(tls), Some(token)) = (tls, token) else {
            tracing::warn!(namespace = %address.namespace, cluster = %address.cluster, "the server Secret's ca.crt or the status token is missing or unusable");
            return None;
        };
        let access = Arc::new(Access {
            tls,
            ca_fingerprint,
            token: token.trim().to_owned(),
            read_at: Instant::now(),
        });
        let mut remembered = self.remembered();
        if remembered.len() >= REMEMBERED {
            remembered.clear();
        }
        remembered.insert(key, access.clone());
        Some(access)
    }

    async fn read(&self, address: &InstanceAddress) -> Result<InstanceStatus, Failure> {
        // Never in clear (issue 47): a pod without the label (removed by someone who may edit
        // pods, or one of a Tusk from before TLS until the rollout replaces it) is not read,
        // since an answer in clear could come from anyone and would feed a failover.
        if !address.tls {
            return Err(Failure::Unanswered);
        }
        let tcp = TcpStream::connect((address.ip.as_str(), self.port))
            .await
            .map_err(|_| Failure::Unanswered)?;
        let (tls, token) = self.verified(address, tcp).await?;
        let report = get(tls, &address.server_name, Some(&token)).await?;
        // One certificate serves every pod of the cluster, so the name verified does not tell
        // the pods apart: the report must be of the pod asked (a reused IP, a pod answering for
        // another).
        if report.pod != address.pod {
            tracing::warn!(pod = %address.pod, answered = %report.pod,
                           "status port: the report is another pod's");
            return Err(Failure::Unanswered);
        }
        Ok(report)
    }

    /// A TLS session with the manager at `address`, verified by its name against the
    /// cluster's CA, and the token to present on it.
    async fn verified(
        &self,
        address: &InstanceAddress,
        tcp: TcpStream,
    ) -> Result<(tokio_rustls::client::TlsStream<TcpStream>, String), Failure> {
        let access = self.access(address).await.ok_or(Failure::Unanswered)?;
        let name =
            ServerName::try_from(address.server_name.clone()).map_err(|_| Failure::Refused)?;
        let tls = access.tls.connect(name, tcp).await.map_err(|e| {
            tracing::warn!(pod = %address.pod, error = %e, "status port: TLS refused");
            Failure::Refused
        })?;
        Ok((tls, access.token.clone()))
    }

    /// `POST /archive/check` to the manager at `address` (TLS, the token; a pod of an earlier
    /// Tusk has no such request).
    async fn post_check(&self, address: &InstanceAddress) -> Result<(), Failure> {
        if !address.tls {
            return Err(Failure::Unanswered);
        }
        let tcp = TcpStream::connect((address.ip.as_str(), self.port))
            .await
            .map_err(|_| Failure::Unanswered)?;
        let (tls, token) = self.verified(address, tcp).await?;
        let request = Request::post("/archive/check");
        match send(tls, request, &address.server_name, Some(&token), None)
            .await?
            .status()
        {
            StatusCode::ACCEPTED => Ok(()),
            StatusCode::UNAUTHORIZED => Err(Failure::Refused),
            _ => Err(Failure::Unanswered),
        }
    }

    /// An upgrade's request to the manager at `address` (TLS, the token): its status and body.
    async fn upgrade(
        &self,
        address: &InstanceAddress,
        request: &UpgradeRequest,
    ) -> Result<UpgradeAnswer, Failure> {
        if !address.tls {
            return Err(Failure::Unanswered);
        }
        let tcp = TcpStream::connect((address.ip.as_str(), self.port))
            .await
            .map_err(|_| Failure::Unanswered)?;
        let (tls, token) = self.verified(address, tcp).await?;
        let builder = match request.body {
            Some(_) => Request::post(request.path),
            None => Request::get(request.path),
        };
        let body = request.body.clone();
        let response = send(tls, builder, &address.server_name, Some(&token), body).await?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            return Err(Failure::Refused);
        }
        let body = (response.into_body().collect().await).map_err(|_| Failure::Unanswered)?;
        Ok(UpgradeAnswer {
            status: status.as_u16(),
            body: String::from_utf8_lossy(&body.to_bytes()).into_owned(),
        })
    }

    /// Forgets the cluster's access after a refusal by TLS or token: read again next time.
    fn forget(&self, address: &InstanceAddress) {
        let key = (address.namespace.clone(), address.cluster.clone());
        self.remembered().remove(&key);
    }
}

/// Sends `request` (with `body` as JSON, if any) on an open connection with the host and the
/// token; the response.
async fn send<S>(
    io: S,
    request: hyper::http::request::Builder,
    host: &str,
    token: Option<&str>,
    body: Option<String>,
) -> Result<hyper::Response<hyper::body::Incoming>, Failure>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|_| Failure::Unanswered)?;
    tokio::spawn(connection);
    let mut request = request.header(header::HOST, host);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|_| Failure::Unanswered)?;
    sender
        .send_request(request)
        .await
        .map_err(|_| Failure::Unanswered)
}

/// `GET /status` on an open connection.
async fn get<S>(io: S, host: &str, token: Option<&str>) -> Result<InstanceStatus, Failure>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let response = send(io, Request::get("/status"), host, token, None).await?;
    match response.status() {
        StatusCode::OK => {}
        StatusCode::UNAUTHORIZED => return Err(Failure::Refused),
        _ => return Err(Failure::Unanswered),
    }
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|_| Failure::Unanswered)?;
    serde_json::from_slice(&body.to_bytes()).map_err(|_| Failure::Unanswered)
}

#[async_trait::async_trait]
impl StatusSource for InstanceReader {
    async fn report(&self, address: &InstanceAddress) -> Option<InstanceStatus> {
        match tokio::time::timeout(TIMEOUT, self.read(address)).await {
            Ok(Ok(report)) => Some(report),
            Ok(Err(Failure::Refused)) => {
                self.forget(address);
                None
            }
            Ok(Err(Failure::Unanswered)) | Err(_) => None,
        }
    }

    async fn upgrade_request(
        &self,
        address: &InstanceAddress,
        request: &UpgradeRequest,
    ) -> Option<UpgradeAnswer> {
        match tokio::time::timeout(UPGRADE_TIMEOUT, self.upgrade(address, request)).await {
            Ok(Ok(answer)) => Some(answer),
            Ok(Err(Failure::Refused)) => {
                self.forget(address);
                None
            }
            Ok(Err(Failure::Unanswered)) | Err(_) => None,
        }
    }

    async fn ask_archive_check(&self, address: &InstanceAddress) -> bool {
        matches!(
            tokio::time::timeout(TIMEOUT, self.post_check(address)).await,
            Ok(Ok(()))
        )
    }
}

#[cfg(test)]
#[path = "instance_reader_tests.rs"]
mod tests;
