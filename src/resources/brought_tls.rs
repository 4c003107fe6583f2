//! A server certificate the user brings (`spec.tls.serverSecret`, often cert-manager's) is
//! checked before any pod mounts it (issue 47, defect 5). A certificate that only names the
//! `.cluster.local` forms passed before, Ready stayed True, and then no standby could verify
//! its primary nor the operator read `/status`: no replication, no failover. Each check is one
//! way a certificate PostgreSQL accepts still breaks the cluster:
//! - every name Tusk dials (`-rw`, `-ro` with replicas, each pod through the headless Service),
//!   as a DNS subject alternative name (rustls and libpq ignore the CN beside them);
//! - valid now; the key is the certificate's; a chain to `ca.crt` (what clients trust);
//! - not signed with Ed25519 or Ed448: `tls-server-end-point` channel binding, which every
//!   Tusk client asks for, has no hash to use with them.

use k8s_openapi::api::core::v1::Secret;
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

use super::Cluster;
use super::tls::{CA_CRT, TLS_CRT, TLS_KEY, TlsError};

/// Every name a Tusk client dials and verifies: the agents' `-rw` (and `-ro` base backups with
/// replicas), the standbys' and the operator's `<pod>.<cluster>-hl.<ns>.svc` of each instance.
pub fn dialed_names(cluster: &Cluster) -> Vec<String> {
    let mut names = vec![cluster.rw_host()];
    if cluster.spec.instances > 1 {
        names.push(format!(
            "{}.{}.svc",
            cluster.ro_service_name(),
            cluster.namespace
        ));
    }
    names.extend((0..cluster.spec.instances).map(|i| {
        format!(
            "{}-{i}.{}",
            cluster.statefulset_name(),
            cluster.peer_domain()
        )
    }));
    names
}

/// Checks the brought Secret `secret` for `names` at `now`; the first problem, said plainly.
pub fn check(secret: &Secret, names: &[String], now: OffsetDateTime) -> Result<(), TlsError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let refused = |problem: String| TlsError::Brought {
        secret: name.clone(),
        problem,
    };
    let text = |key: &'static str| {
        let value = secret.data.as_ref().and_then(|d| d.get(key));
        let value = value.filter(|v| !v.0.is_empty());
        value
            .map(|v| v.0.as_slice())
            .ok_or_else(|| TlsError::Missing {
                secret: name.clone(),
                key,
            })
    };
    let (chain_pem, key_pem, ca_pem) = (text(TLS_CRT)?, text(TLS_KEY)?, text(CA_CRT)?);
    let chain = pems(chain_pem).map_err(|e| refused(format!("{TLS_CRT}: {e}")))?;
    let roots = pems(ca_pem).map_err(|e| refused(format!("{CA_CRT}: {e}")))?;
    let chain = parsed(&chain).map_err(|e| refused(format!("{TLS_CRT}: {e}")))?;
    let roots = parsed(&roots).map_err(|e| refused(format!("{CA_CRT}: {e}")))?;
    let leaf = chain
        .first()
        .ok_or_else(|| refused(format!("{TLS_CRT} holds no certificate")))?;
    validity(leaf, now).map_err(refused)?;
    missing_names(leaf, names).map_err(refused)?;
    channel_binding(leaf).map_err(refused)?;
    key_matches(leaf, key_pem).map_err(refused)?;
    chains_to(leaf, &chain[1..], &roots).map_err(refused)
}

fn pems(bundle: &[u8]) -> Result<Vec<Pem>, String> {
    let pems: Vec<Pem> = Pem::iter_from_buffer(bundle)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not PEM: {e}"))?;
    match pems.is_empty() {
        true => Err("no certificate in PEM".to_owned()),
        false => Ok(pems),
    }
}

fn parsed(pems: &[Pem]) -> Result<Vec<X509Certificate<'_>>, String> {
    (pems.iter())
        .filter(|p| p.label == "CERTIFICATE")
        .map(|p| {
            p.parse_x509()
                .map_err(|e| format!("not a certificate: {e}"))
        })
        .collect()
}

fn validity(leaf: &X509Certificate, now: OffsetDateTime) -> Result<(), String> {
    let (from, until) = (leaf.validity().not_before, leaf.validity().not_after);
    if now > until.to_datetime() {
        return Err(format!("the certificate expired at {until}"));
    }
    if now < from.to_datetime() {
        return Err(format!("the certificate is not valid before {from}"));
    }
    Ok(())
}

/// Whether `host` is `pattern` or matches its wildcard (`*.` as the whole leftmost label).
fn name_matches(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match pattern.strip_prefix("*.") {
        Some(rest) => host
            .split_once('.')
            .is_some_and(|(label, parent)| !label.is_empty() && parent == rest),
        None => pattern == host,
    }
}

fn missing_names(leaf: &X509Certificate, names: &[String]) -> Result<(), String> {
    let carried: Vec<&str> = match leaf.subject_alternative_name() {
        Ok(Some(san)) => (san.value.general_names.iter())
            .filter_map(|n| match n {
                GeneralName::DNSName(name) => Some(*name),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let missing: Vec<&str> = (names.iter())
        .filter(|host| !carried.iter().any(|p| name_matches(p, host)))
        .map(String::as_str)
        .collect();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "the certificate does not name {} as a DNS subject alternative name (Tusk's \
             clients dial and verify these; it names {carried:?})",
            missing.join(", ")
        )),
    }
}

fn channel_binding(leaf: &X509Certificate) -> Result<(), String> {
    let algorithm = leaf.signature_algorithm.algorithm.to_id_string();
    let edwards = [("1.3.101.112", "Ed25519"), ("1.3.101.113", "Ed448")];
    match edwards.iter().find(|(oid, _)| *oid == algorithm) {
        Some((_, which)) => Err(format!(
            "the certificate is signed with {which}, which channel binding \
             (tls-server-end-point, asked for by every Tusk client) cannot hash: sign it with \
             ECDSA or RSA"
        )),
        None => Ok(()),
    }
}

/// The public key `key_pem` holds, as the certificate's `subjectPublicKey` carries it; None for
/// a key form read here only by PostgreSQL (which then refuses a mismatch itself).
fn public_key_of(key_pem: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let pems = Pem::iter_from_buffer(key_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{TLS_KEY} is not PEM: {e}"))?;
    let Some(key) = pems.iter().find(|p| p.label.ends_with("PRIVATE KEY")) else {
        return Err(format!("{TLS_KEY} holds no private key"));
    };
    let unreadable = |e: String| format!("{TLS_KEY} cannot be read: {e}");
    match key.label.as_str() {
        "PRIVATE KEY" => {
            let pem = pem_text("PRIVATE KEY", &key.contents);
            let pair = rcgen::KeyPair::from_pem(&pem).map_err(|e| unreadable(e.to_string()))?;
            Ok(Some(pair.public_key_raw().to_vec()))
        }
        "RSA PRIVATE KEY" => {
            let pair = ring::rsa::KeyPair::from_der(&key.contents)
                .map_err(|e| unreadable(e.to_string()))?;
            Ok(Some(
                ring::signature::KeyPair::public_key(&pair)
                    .as_ref()
                    .to_vec(),
            ))
        }
        "EC PRIVATE KEY" => Ok(sec1_public_key(&key.contents)),
        _ => Ok(None),
    }
}

/// The optional `publicKey [1] BIT STRING` of a SEC1 `ECPrivateKey`.
fn sec1_public_key(der: &[u8]) -> Option<Vec<u8>> {
    use x509_parser::der_parser::ber::BerObjectContent;
    let (_, sequence) = x509_parser::der_parser::parse_der(der).ok()?;
    let BerObjectContent::Sequence(fields) = &sequence.content else {
        return None;
    };
    let tagged = fields.iter().find(|f| f.header.tag().0 == 1)?;
    let inner = tagged.as_slice().ok()?;
    let (_, bits) = x509_parser::der_parser::parse_der(inner).ok()?;
    match bits.content {
        BerObjectContent::BitString(_, data) => Some(data.data.to_vec()),
        _ => None,
    }
}

fn pem_text(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = (body.as_bytes().chunks(64))
        .filter_map(|c| std::str::from_utf8(c).ok())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

fn key_matches(leaf: &X509Certificate, key_pem: &[u8]) -> Result<(), String> {
    let certified = &leaf.public_key().subject_public_key.data;
    match public_key_of(key_pem)? {
        Some(key) if key.as_slice() != certified.as_ref() => Err(format!(
            "{TLS_KEY} is not the key of the certificate in {TLS_CRT}"
        )),
        _ => Ok(()),
    }
}

/// Whether `leaf`, through the intermediates after it in `tls.crt`, is signed by a
/// certificate of `ca.crt`.
fn chains_to(
    leaf: &X509Certificate,
    intermediates: &[X509Certificate],
    roots: &[X509Certificate],
) -> Result<(), String> {
    let signed_by = |child: &X509Certificate, parent: &X509Certificate| {
        child.issuer() == parent.subject()
            && child.verify_signature(Some(parent.public_key())).is_ok()
    };
    let mut current = leaf;
    for _ in 0..=intermediates.len() {
        if roots.iter().any(|root| signed_by(current, root)) {
            return Ok(());
        }
        match intermediates.iter().find(|i| signed_by(current, i)) {
            Some(next) => current = next,
            None => break,
        }
    }
    Err(format!(
        "the certificate (issued by {}) does not chain to a CA in {CA_CRT}, which is what \
         Tusk's clients trust",
        leaf.issuer()
    ))
}

#[cfg(test)]
#[path = "brought_tls_tests.rs"]
mod tests;
