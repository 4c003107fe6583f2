//! TLS for Tusk's own PostgreSQL clients (the instance manager's peer connections, the backup
//! agent, the e2e writer). A server is trusted only if its certificate chains to the cluster's
//! CA and names the host dialled (what libpq calls `verify-full`); the stream offers
//! `tls-server-end-point` channel binding, so SCRAM can prove no one sits in between.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_postgres::config::{ChannelBinding, SslMode};
use tokio_postgres::{Client, Config, NoTls};
pub use tokio_postgres_rustls::MakeRustlsConnect;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the CA file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the CA {origin} holds no PEM certificate")]
    NoCertificate { origin: String },
    #[error("the CA {origin}: {reason}")]
    Invalid { origin: String, reason: String },
    #[error("the client certificate {path}: {reason}")]
    Identity { path: String, reason: String },
}

/// A client certificate and its key (PEM files), presented to a server that asks for one
/// (`pg_hba.conf`'s `clientcert`, the `cert` method). Read at every call, like the CA.
#[derive(Clone, Copy, Debug)]
pub struct Identity<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
}

impl Identity<'_> {
    fn read(self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
        let bad = |path: &Path, reason: String| TlsError::Identity {
            path: path.display().to_string(),
            reason,
        };
        let pem = std::fs::read(self.cert).map_err(|e| bad(self.cert, e.to_string()))?;
        let chain = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(self.cert, format!("bad PEM: {e}")))?;
        if chain.is_empty() {
            return Err(bad(self.cert, "holds no PEM certificate".into()));
        }
        let pem = std::fs::read(self.key).map_err(|e| bad(self.key, e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| bad(self.key, format!("no private key: {e}")))?;
        Ok((chain, key))
    }
}

/// A connector that trusts only the CA certificates in the PEM file `ca_file`. Read at every
/// call, so a rotated CA is picked up by the next connection.
pub fn verifying(ca_file: &Path) -> Result<MakeRustlsConnect, TlsError> {
    verifying_as(ca_file, None)
}

/// Like [`verifying`], presenting `identity` when the server asks for a client certificate.
pub fn verifying_as(
    ca_file: &Path,
    identity: Option<Identity>,
) -> Result<MakeRustlsConnect, TlsError> {
    let pem = std::fs::read(ca_file).map_err(|source| TlsError::Read {
        path: ca_file.display().to_string(),
        source,
    })?;
    connector(&pem, &format!("file {}", ca_file.display()), identity)
}

/// Like [`verifying`], from PEM text already read (`origin` names it in errors).
pub fn verifying_pem(pem: &[u8], origin: &str) -> Result<MakeRustlsConnect, TlsError> {
    connector(pem, origin, None)
}

fn connector(
    pem: &[u8],
    origin: &str,
    identity: Option<Identity>,
) -> Result<MakeRustlsConnect, TlsError> {
    let invalid = |reason: String| TlsError::Invalid {
        origin: origin.to_owned(),
        reason,
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| invalid(format!("bad PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| invalid(format!("not a usable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoCertificate {
            origin: origin.to_owned(),
        });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("no TLS version in common with the provider: {e}")))?
        .with_root_certificates(roots);
    let config = match identity {
        None => config.with_no_client_auth(),
        Some(identity) => {
            let (chain, key) = identity.read()?;
            config
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Identity {
                    path: identity.cert.display().to_string(),
                    reason: e.to_string(),
                })?
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// Connects with `config`, over verified TLS with channel binding required when `tls` is given
/// (a server that cannot do both is refused), in clear otherwise (local sockets, tests). The
/// connection runs on its own task; `label` names it in the debug log when it ends.
pub async fn connect(
    config: &Config,
    tls: Option<MakeRustlsConnect>,
    label: &'static str,
) -> Result<Client, tokio_postgres::Error> {
    match tls {
        Some(tls) => {
            let mut config = config.clone();
            config
                .ssl_mode(SslMode::Require)
                .channel_binding(ChannelBinding::Require);
            let (client, connection) = config.connect(tls).await?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, connection = label, "connection ended");
                }
            });
            Ok(client)
        }
        None => {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, connection = label, "connection ended");
                }
            });
            Ok(client)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_a_certificate_is_refused_by_name() {
        let Err(err) = verifying_pem(b"not pem at all", "Secret demo-server-tls") else {
            panic!("a CA without a certificate was accepted");
        };
        assert_eq!(
            err.to_string(),
            "the CA Secret demo-server-tls holds no PEM certificate"
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let Err(err) = verifying(Path::new("/nonexistent/ca.crt")) else {
            panic!("a missing CA file was accepted");
        };
        assert!(
            err.to_string()
                .starts_with("reading the CA file /nonexistent/ca.crt")
        );
    }
}
