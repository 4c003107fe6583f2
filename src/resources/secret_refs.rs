//! The Secrets a spec names (issue 47, defect 3). The operator reads them and sends their
//! values (an access key id, to an endpoint the spec chooses), and the pods it builds mount
//! them: someone allowed to edit `PostgreSQL` objects but not to read Secrets could have
//! borrowed another cluster's `-superuser`, `-replication` or `-server-tls` that way (as an S3
//! access key sent to their own endpoint, or `serverSecret: other-server-tls` mounting another
//! cluster's keys). A spec names only Secrets of the user's own, never one Tusk generated, for
//! another cluster or this one.

use crate::crd::{Destination, PostgreSQLSpec, SecretKeyRef};

/// One Secret a spec names, and the field that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub field: String,
    pub secret: String,
}

/// A spec that names a Secret Tusk generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{field} names Secret {secret}, which Tusk generated{for_cluster}: a spec may name only \
     Secrets of your own (Tusk's hold a cluster's passwords and keys, which the operator would \
     otherwise hand to whoever edits this spec)"
)]
pub struct BorrowedSecret {
    pub field: String,
    pub secret: String,
    for_cluster: String,
}

/// Every Secret `spec` names: the server certificate, and the credentials and CA bundle of the
/// backup destination and of a restore's source.
pub fn named(spec: &PostgreSQLSpec) -> Vec<Named> {
    let mut out = Vec::new();
    if let Some(tls) = &spec.tls
        && !tls.server_secret.is_empty()
    {
        out.push(Named {
            field: "spec.tls.serverSecret".into(),
            secret: tls.server_secret.clone(),
        });
    }
    if let Some(backup) = &spec.backup {
        of_destination("spec.backup.destination", &backup.destination, &mut out);
    }
    let source = spec.restore.as_ref().and_then(|r| r.object_store.as_ref());
    if let Some(source) = source {
        of_destination(
            "spec.restore.objectStore.destination",
            &source.destination,
            &mut out,
        );
    }
    out
}

fn of_destination(prefix: &str, destination: &Destination, out: &mut Vec<Named>) {
    let mut add = |field: &str, key: &SecretKeyRef| {
        out.push(Named {
            field: format!("{prefix}.{field}"),
            secret: key.name.clone(),
        });
    };
    if let Some(s3) = &destination.s3 {
        if let Some(credentials) = &s3.credentials {
            add("s3.credentials.accessKeyId", &credentials.access_key_id);
            add(
                "s3.credentials.secretAccessKey",
                &credentials.secret_access_key,
            );
        }
        if let Some(key) = s3
            .ca_bundle
            .as_ref()
            .and_then(|b| b.secret_key_ref.as_ref())
        {
            add("s3.caBundle.secretKeyRef", key);
        }
    }
    if let Some(credentials) = destination
        .gcs
        .as_ref()
        .and_then(|g| g.credentials.as_ref())
    {
        add(
            "gcs.credentials.serviceAccountKey",
            &credentials.service_account_key,
        );
    }
}

/// The first of `named` that is Tusk's: `tusks` answers, for a Secret name, whether Tusk
/// generated it (`Some`) and for which cluster, when it records one.
pub fn borrowed(
    named: &[Named],
    tusks: impl Fn(&str) -> Option<Option<String>>,
) -> Result<(), BorrowedSecret> {
    for n in named {
        if let Some(owner) = tusks(&n.secret) {
            return Err(BorrowedSecret {
                field: n.field.clone(),
                secret: n.secret.clone(),
                for_cluster: owner.map_or(String::new(), |c| format!(" for cluster {c}")),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::postgresql;

    const NAMING_ALL: &str = "storage: {size: 1Gi}\ntls: {serverSecret: shop-tls}\n\
        backup:\n  schedule: '@daily'\n  destination:\n    s3:\n      bucket: b\n      \
        credentials:\n        accessKeyId: {name: s3, key: id}\n        secretAccessKey: {name: \
        s3-secret, key: secret}\n      caBundle:\n        secretKeyRef: {name: ca, key: ca.crt}\n\
        restore:\n  objectStore:\n    cluster: old\n    destination:\n      gcs:\n        \
        bucket: g\n        credentials:\n          serviceAccountKey: {name: gcs, key: key.json}\n";

    #[test]
    fn every_secret_a_spec_names_is_found_with_its_field() {
        let pg = postgresql(NAMING_ALL);
        let found: Vec<(String, String)> = named(&pg.spec)
            .into_iter()
            .map(|n| (n.field, n.secret))
            .collect();
        let expected = [
            ("spec.tls.serverSecret", "shop-tls"),
            ("spec.backup.destination.s3.credentials.accessKeyId", "s3"),
            (
                "spec.backup.destination.s3.credentials.secretAccessKey",
                "s3-secret",
            ),
            ("spec.backup.destination.s3.caBundle.secretKeyRef", "ca"),
            (
                "spec.restore.objectStore.destination.gcs.credentials.serviceAccountKey",
                "gcs",
            ),
        ]
        .map(|(f, s)| (f.to_owned(), s.to_owned()));
        assert_eq!(found, expected);
    }

    #[test]
    fn a_secret_tusk_generated_is_refused_naming_the_field_and_its_cluster() {
        let pg = postgresql(NAMING_ALL);
        let names = named(&pg.spec);
        assert_eq!(borrowed(&names, |_| None), Ok(()));
        let refused = borrowed(&names, |name| {
            (name == "s3-secret").then(|| Some("other".to_owned()))
        })
        .unwrap_err();
        let message = refused.to_string();
        assert!(
            message.starts_with(
                "spec.backup.destination.s3.credentials.secretAccessKey names Secret s3-secret, \
                 which Tusk generated for cluster other:"
            ),
            "{message}"
        );
    }
}
