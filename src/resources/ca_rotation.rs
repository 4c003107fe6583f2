//! The life of a cluster's CA: rotated well before it expires, with an overlap, so that no
//! client ever meets a certificate it does not trust and no pod restarts.
//!
//! Every `ca.crt` Tusk writes (the server Secret the pods mount, the credentials Secrets
//! applications read) holds the CA *bundle* of [`CaState::bundle`]; the server and replication
//! certificates are signed by its signer. A rotation takes three steps, one per reconcile, each
//! at least an overlap apart, each reaching PostgreSQL by a reload:
//! 1. **Published**: a new CA is issued and added to the bundle; the leaves stay signed by the
//!    old one. Clients (standbys, the operator, applications that re-read `ca.crt`) learn it.
//! 2. **Promoted**: the new CA signs; the leaves are issued again by it; the old CA stays in
//!    the bundle, so a client that has not re-read `ca.crt`, and a standby still presenting an
//!    old replication certificate, keep working.
//! 3. **Steady** again: the old CA leaves the bundle.
//!
//! Rotation starts once a third of the CA's life is left; each overlap is a tenth of it, so the
//! old CA is retired with more than a tenth of its life to spare (for the default ten years:
//! starts with 3.3 years left, an overlap of a year). A leaf lives at most 7/30 of a CA, so no
//! leaf the old CA signed outlives it. A signer found expired (an operator stopped for years)
//! is replaced at once. Pure functions: the clock comes in as a value.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use time::OffsetDateTime;

use super::Cluster;
pub use super::tls::Lifetimes;
use super::tls::{self, CA_CRT, CA_FINGERPRINT_ANNOTATION, CA_KEY, Pem, TlsError};
use crate::crd::CertificateTimes;

/// The CA published but not yet signing, and the CA retired from signing but still trusted.
pub const NEXT_CRT: &str = "next.crt";
pub const NEXT_KEY: &str = "next.key";
pub const PREVIOUS_CRT: &str = "previous.crt";
/// On the CA Secret: when the next rotation step is due (RFC 3339). The cache keeps it, so a
/// reconcile reads the CA Secret only when a step is due.
pub const CA_NEXT_STEP_ANNOTATION: &str = "tusk.dev/ca-next-step";

/// Where a CA rotation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// One CA, signing and trusted.
    Steady,
    /// A new CA trusted beside the signing one.
    Published,
    /// The new CA signs; the old one is still trusted.
    Promoted,
    /// The signing CA had expired: replaced at once (no overlap can help clients then).
    Replaced,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steady => "Steady",
            Self::Published => "Published",
            Self::Promoted => "Promoted",
            Self::Replaced => "Replaced",
        }
    }
}

/// What the CA Secret holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaState {
    /// The CA that signs the leaves.
    pub signer: Pem,
    /// Published, not yet signing (stage [`Stage::Published`]).
    pub next: Option<Pem>,
    /// Retired from signing, still trusted (stage [`Stage::Promoted`]).
    pub previous: Option<String>,
    /// When the next step is due.
    pub next_step: OffsetDateTime,
}

fn stored(secret: &Secret, key: &'static str) -> Option<String> {
    let value = secret.data.as_ref()?.get(key)?;
    String::from_utf8(value.0.clone())
        .ok()
        .filter(|v| !v.is_empty())
}

/// When the CA certificate `cert` (PEM), the `key` of `secret`, expires.
fn ca_not_after(secret: &str, key: &'static str, cert: &str) -> Result<OffsetDateTime, TlsError> {
    let unreadable = |reason: String| TlsError::Unreadable {
        secret: secret.to_owned(),
        key,
        reason,
    };
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(cert.as_bytes()).map_err(|e| unreadable(e.to_string()))?;
    let parsed = pem.parse_x509().map_err(|e| unreadable(e.to_string()))?;
    let not_after = parsed.validity().not_after.timestamp();
    OffsetDateTime::from_unix_timestamp(not_after).map_err(|e| unreadable(e.to_string()))
}

/// When a steady CA that expires at `not_after` starts its rotation (not before `now`).
fn rotation_start(not_after: OffsetDateTime, lifetimes: &Lifetimes) -> OffsetDateTime {
    not_after - lifetimes.ca_rotation()
}

impl CaState {
    /// A new CA, steady.
    pub fn issue(
        cluster: &Cluster,
        now: OffsetDateTime,
        lifetimes: &Lifetimes,
    ) -> Result<Self, TlsError> {
        Ok(Self {
            signer: tls::issue_ca(cluster, now, lifetimes)?,
            next: None,
            previous: None,
            next_step: rotation_start(now + lifetimes.ca, lifetimes),
        })
    }

    /// The state `secret` (Secret `<name>-ca`) holds. A Secret from before rotations (no
    /// [`CA_NEXT_STEP_ANNOTATION`]) is steady, its schedule taken from its certificate.
    pub fn read(secret: &Secret, lifetimes: &Lifetimes) -> Result<Self, TlsError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let get = |key: &'static str| {
            stored(secret, key).ok_or(TlsError::Missing {
                secret: name.clone(),
                key,
            })
        };
        let signer = Pem {
            cert: get(CA_CRT)?,
            key: get(CA_KEY)?,
        };
        let next = match (stored(secret, NEXT_CRT), stored(secret, NEXT_KEY)) {
            (Some(cert), Some(key)) => Some(Pem { cert, key }),
            _ => None,
        };
        let previous = stored(secret, PREVIOUS_CRT).filter(|_| next.is_none());
        let next_step = match recorded_next_step(secret) {
            Some(at) => at,
            None => rotation_start(ca_not_after(&name, CA_CRT, &signer.cert)?, lifetimes),
        };
        Ok(Self {
            signer,
            next,
            previous,
            next_step,
        })
    }

    pub fn stage(&self) -> Stage {
        match (&self.next, &self.previous) {
            (Some(_), _) => Stage::Published,
            (None, Some(_)) => Stage::Promoted,
            (None, None) => Stage::Steady,
        }
    }

    /// What every `ca.crt` holds: the signer, then the CA published or retired beside it.
    pub fn bundle(&self) -> String {
        let mut bundle = self.signer.cert.clone();
        for other in [self.next.as_ref().map(|n| &n.cert), self.previous.as_ref()]
            .into_iter()
            .flatten()
        {
            if !bundle.ends_with('\n') {
                bundle.push('\n');
            }
            bundle.push_str(other);
        }
        bundle
    }

    /// When the signer expires.
    pub fn signer_not_after(&self, cluster: &Cluster) -> Result<OffsetDateTime, TlsError> {
        ca_not_after(&cluster.ca_secret_name(), CA_CRT, &self.signer.cert)
    }

    /// The next step when it is due at `now`, and the stage it reached; `None` when none is.
    pub fn advance(
        &self,
        cluster: &Cluster,
        now: OffsetDateTime,
        lifetimes: &Lifetimes,
    ) -> Result<Option<(Self, Stage)>, TlsError> {
        // Every step is due before the signer expires: a CA read only when one is.
        if now < self.next_step {
            return Ok(None);
        }
        let not_after = self.signer_not_after(cluster)?;
        if now >= not_after {
            return Ok(Some((
                Self::issue(cluster, now, lifetimes)?,
                Stage::Replaced,
            )));
        }
        let overlap = now + lifetimes.overlap();
        let stepped = match (&self.next, &self.previous) {
            (None, None) => Self {
                signer: self.signer.clone(),
                next: Some(tls::issue_ca(cluster, now, lifetimes)?),
                previous: None,
                next_step: overlap,
            },
            (Some(next), _) => Self {
                signer: next.clone(),
                next: None,
                previous: Some(self.signer.cert.clone()),
                next_step: overlap,
            },
            (None, Some(_)) => Self {
                signer: self.signer.clone(),
                next: None,
                previous: None,
                // Never at once again, even with lifetimes shortened since it was issued.
                next_step: rotation_start(not_after, lifetimes).max(overlap),
            },
        };
        let stage = stepped.stage();
        Ok(Some((stepped, stage)))
    }

    /// Secret `<name>-ca`: the CAs and their keys, never mounted; the bundle's fingerprint and
    /// the next step's time in annotations.
    pub fn secret(&self, cluster: &Cluster) -> Secret {
        let mut metadata =
            cluster.child_meta(cluster.ca_secret_name(), super::Component::Credentials);
        let next_step =
            jiff::Timestamp::from_second(self.next_step.unix_timestamp()).unwrap_or_default();
        metadata.annotations = Some(BTreeMap::from([
            (
                CA_FINGERPRINT_ANNOTATION.to_owned(),
                tls::ca_fingerprint(&self.bundle()),
            ),
            (CA_NEXT_STEP_ANNOTATION.to_owned(), next_step.to_string()),
        ]));
        let next = self.next.as_ref();
        let entries = [
            (CA_CRT, self.signer.cert.as_str()),
            (CA_KEY, self.signer.key.as_str()),
            (NEXT_CRT, next.map_or("", |n| n.cert.as_str())),
            (NEXT_KEY, next.map_or("", |n| n.key.as_str())),
            (PREVIOUS_CRT, self.previous.as_deref().unwrap_or("")),
        ];
        Secret {
            metadata,
            type_: Some("Opaque".to_owned()),
            data: Some(tls::data(&entries)),
            ..Secret::default()
        }
    }
}

/// The next step's time `secret` records, if it records one that parses.
pub fn recorded_next_step(secret: &Secret) -> Option<OffsetDateTime> {
    tls::annotated_time(secret, CA_NEXT_STEP_ANNOTATION)
}

/// Whether the CA Secret `secret` (as cached) wants a look at `now`: a step is due, or it has
/// no schedule yet.
pub fn step_due(secret: &Secret, now: OffsetDateTime) -> bool {
    recorded_next_step(secret).is_none_or(|at| now >= at)
}

/// What the status shows of the server Secret's expiry and the CA Secret's schedule.
pub fn certificate_times(server: Option<&Secret>, ca: Option<&Secret>) -> Option<CertificateTimes> {
    let time = |at: OffsetDateTime| {
        jiff::Timestamp::from_second(at.unix_timestamp())
            .ok()
            .map(Time)
    };
    let times = CertificateTimes {
        server_not_after: server.and_then(tls::recorded_not_after).and_then(time),
        ca_next_step: ca.and_then(recorded_next_step).and_then(time),
    };
    (times != CertificateTimes::default()).then_some(times)
}

#[cfg(test)]
#[path = "ca_rotation_tests.rs"]
mod tests;
