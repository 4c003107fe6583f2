//! TLS for the status port: the server certificate and key PostgreSQL serves (the mounted
//! server Secret's `tls.crt` and `tls.key`), read again at each handshake so a renewal, a CA
//! rotation or a Secret swapped by the user or cert-manager is served by the next connection,
//! never by a restart. TLS 1.3 only, as PostgreSQL is configured by default.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::error::Error;

/// The certificate and key files, and the pair last parsed from them (by a digest of their
/// bytes): parsing happens only when the files change.
#[derive(Debug)]
pub struct MountedCertificate {
    cert: PathBuf,
    key: PathBuf,
    loaded: Mutex<Option<(u64, Arc<CertifiedKey>)>>,
}

fn digest(cert: &[u8], key: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (cert, key).hash(&mut hasher);
    hasher.finish()
}

/// The certificate chain and signing key in PEM `cert` and `key`, or why not.
fn parse(cert: &[u8], key: &[u8]) -> Result<CertifiedKey, String> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls.crt: {e}"))?;
    if chain.is_empty() {
        return Err("tls.crt holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("tls.key: {e}"))?;
    let signer = ring::sign::any_supported_type(&key).map_err(|e| format!("tls.key: {e}"))?;
    let pair = CertifiedKey::new(chain, signer);
    // A certificate read just before the kubelet swapped the files and a key read just after
    // would not match: refused here, the old pair keeps serving.
    pair.keys_match().map_err(|e| format!("tls.key: {e}"))?;
    Ok(pair)
}

impl MountedCertificate {
    /// `tls.crt` and `tls.key` in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            loaded: Mutex::new(None),
        }
    }

    /// The pair the files hold now; while they cannot be read or do not match, the last good
    /// pair (none before the first).
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let files = std::fs::read(&self.cert).and_then(|c| Ok((c, std::fs::read(&self.key)?)));
        let (cert, key) = match files {
            Ok(files) => files,
            Err(e) => {
                tracing::warn!(error = %e, cert = %self.cert.display(), "status port: certificate files unreadable");
                return loaded.as_ref().map(|(_, pair)| pair.clone());
            }
        };
        let now = digest(&cert, &key);
        if let Some((seen, pair)) = loaded.as_ref()
            && *seen == now
        {
            return Some(pair.clone());
        }
        match parse(&cert, &key) {
            Ok(pair) => {
                let pair = Arc::new(pair);
                if loaded.is_some() {
                    tracing::info!("status port: serving the renewed certificate");
                }
                *loaded = Some((now, pair.clone()));
                Some(pair)
            }
            Err(e) => {
                tracing::warn!(error = %e, "status port: certificate files not usable; the last good pair serves");
                loaded.as_ref().map(|(_, pair)| pair.clone())
            }
        }
    }
}

impl ResolvesServerCert for MountedCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// The status port's TLS configuration: TLS 1.3, HTTP/1.1, the certificate in `dir`.
pub fn server_config(dir: &Path) -> Result<Arc<rustls::ServerConfig>, Error> {
    let provider = Arc::new(ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| Error::Config(format!("status port TLS: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(MountedCertificate::in_dir(dir)));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(dir: &Path) -> Vec<u8> {
        tusk_testkit::tls::issue(dir, &[]);
        std::fs::read(dir.join("tls.crt")).unwrap()
    }

    fn served(mounted: &MountedCertificate) -> Vec<u8> {
        mounted.current().unwrap().cert[0].to_vec()
    }

    fn der(pem: &[u8]) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem).unwrap().to_vec()
    }

    #[test]
    fn serves_the_files_and_follows_a_renewal() {
        let dir = tempfile::tempdir().unwrap();
        let first = issue(dir.path());
        let mounted = MountedCertificate::in_dir(dir.path());
        assert_eq!(served(&mounted), der(&first));
        let renewed = issue(dir.path());
        assert_ne!(first, renewed);
        assert_eq!(
            served(&mounted),
            der(&renewed),
            "the next handshake serves it"
        );
    }

    #[test]
    fn a_mismatched_or_missing_pair_leaves_the_last_good_one_serving() {
        let dir = tempfile::tempdir().unwrap();
        let good = issue(dir.path());
        let mounted = MountedCertificate::in_dir(dir.path());
        assert_eq!(served(&mounted), der(&good));
        // Another certificate beside the old key: a half-swapped Secret.
        let other = tempfile::tempdir().unwrap();
        let foreign = issue(other.path());
        std::fs::write(dir.path().join("tls.crt"), &foreign).unwrap();
        assert_eq!(served(&mounted), der(&good));
        std::fs::remove_file(dir.path().join("tls.key")).unwrap();
        assert_eq!(served(&mounted), der(&good));
        let fresh = MountedCertificate::in_dir(dir.path());
        assert!(
            fresh.current().is_none(),
            "nothing to serve before a good pair"
        );
    }
}
