//! A throwaway CA and a server certificate signed by it, for tests that run PostgreSQL with
//! `ssl = on` on 127.0.0.1 and connect with `verify-full` (the name `localhost` and the address
//! 127.0.0.1 are both in the certificate).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// The files of [`issue`], PEM.
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The replication role's client certificate and key (`tusk_replication`), as Tusk's
    /// server Secret carries them.
    pub replication_cert: PathBuf,
    pub replication_key: PathBuf,
    /// The upgrade role's (`tusk_upgrade`), as an online upgrade's new side presents it.
    pub upgrade_cert: PathBuf,
    pub upgrade_key: PathBuf,
}

/// Writes `ca.crt`, `tls.crt` and `tls.key` (0600; the keys of a `kubernetes.io/tls` Secret),
/// `replication.crt` and `replication.key`, and `upgrade.crt` and `upgrade.key` (keys 0600)
/// into `dir` and returns their paths.
/// `extra_names` are DNS names added to `localhost` and 127.0.0.1.
pub fn issue(dir: &Path, extra_names: &[&str]) -> TlsFiles {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::default();
    // A name of its own: two CAs of one name (a rotation) would leave a verifier that picks
    // the issuer by name alone trying the wrong one.
    let issued = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    ca.distinguished_name
        .push(DnType::CommonName, format!("tusk test CA {issued}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().expect("server key");
    let mut names: Vec<String> = vec!["localhost".into()];
    names.extend(extra_names.iter().map(|n| n.to_string()));
    let mut server = CertificateParams::new(names).expect("server names");
    server
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    server
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = server.signed_by(&key, &issuer).expect("server certificate");

    let client = |role: &str| {
        let key = KeyPair::generate().expect("client key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, role);
        let cert = params.signed_by(&key, &issuer).expect("client certificate");
        (cert, key)
    };
    let (replication_cert, replication_key) = client("tusk_replication");
    let (upgrade_cert, upgrade_key) = client("tusk_upgrade");

    let files = TlsFiles {
        ca: dir.join("ca.crt"),
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        replication_cert: dir.join("replication.crt"),
        replication_key: dir.join("replication.key"),
        upgrade_cert: dir.join("upgrade.crt"),
        upgrade_key: dir.join("upgrade.key"),
    };
    std::fs::write(&files.ca, ca_cert.pem()).expect("write ca.crt");
    std::fs::write(&files.cert, cert.pem()).expect("write tls.crt");
    std::fs::write(&files.key, key.serialize_pem()).expect("write tls.key");
    std::fs::write(&files.replication_cert, replication_cert.pem()).expect("replication.crt");
    std::fs::write(&files.replication_key, replication_key.serialize_pem())
        .expect("replication.key");
    std::fs::write(&files.upgrade_cert, upgrade_cert.pem()).expect("upgrade.crt");
    std::fs::write(&files.upgrade_key, upgrade_key.serialize_pem()).expect("upgrade.key");
    use std::os::unix::fs::PermissionsExt;
    for key in [&files.key, &files.replication_key, &files.upgrade_key] {
        std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600)).expect("chmod key");
    }
    files
}

/// postgresql.conf lines serving `files` (TLS 1.3 only, as the operator configures it).
pub fn server_settings(files: &TlsFiles) -> String {
    format!(
        "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nssl_ca_file = '{}'\n\
         ssl_min_protocol_version = 'TLSv1.3'\n",
        files.cert.display(),
        files.key.display(),
        files.ca.display()
    )
}
