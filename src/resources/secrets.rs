//! The superuser and application credential Secrets. Passwords are generated once, from a CSPRNG,
//! and never changed by the operator; one the user changes becomes the role's (its verifier in
//! `<name>-verifiers`, see `clusters::declared_passwords`).
//! What clients need to verify the server (`ca.crt`, `sslmode`, URIs asking for `verify-full`)
//! follows the cluster's CA: [`with_ca`] adds it, recording its fingerprint as the server Secret
//! does ([`CA_FINGERPRINT_ANNOTATION`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use rand::distr::{Alphanumeric, SampleString};

use super::tls::{CA_CRT, CA_FINGERPRINT_ANNOTATION, ca_fingerprint};
use super::{Cluster, Component, POSTGRES_PORT};

/// Name of the PostgreSQL superuser role.
pub const SUPERUSER_NAME: &str = "postgres";

/// 32 alphanumeric characters (about 190 bits) from the thread-local CSPRNG, which is ChaCha12
/// seeded from the operating system; alphanumeric so it is safe in URIs and shell-free configs.
pub fn generate_password() -> String {
    Alphanumeric.sample_string(&mut rand::rng(), 32)
}

/// The password stored in an existing credentials Secret, if any.
pub fn password_of(secret: &Secret) -> Option<String> {
    let bytes = secret.data.as_ref()?.get("password")?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// Secret `<name>-superuser` for the `postgres` role, connecting to the `postgres` database.
pub fn superuser_secret(cluster: &Cluster, password: &str) -> Secret {
    credentials(
        cluster,
        cluster.superuser_secret_name(),
        SUPERUSER_NAME,
        "postgres",
        password,
    )
}

/// Secret `<name>-app` for the application role and database from `spec.bootstrap`.
pub fn app_secret(cluster: &Cluster, password: &str) -> Secret {
    let bootstrap = &cluster.spec.bootstrap;
    credentials(
        cluster,
        cluster.app_secret_name(),
        &bootstrap.owner,
        &bootstrap.database,
        password,
    )
}

/// Name of the role replicas stream as (LOGIN REPLICATION, nothing else).
pub use tusk_contract::roles::REPLICATION_USER;

/// Secret `<name>-replication` for role `tusk_replication`. Replicas reach the primary by its
/// pod's own name, not through a Service, so the host is the headless domain.
pub fn replication_secret(cluster: &Cluster, password: &str) -> Secret {
    let mut secret = credentials(
        cluster,
        cluster.replication_secret_name(),
        REPLICATION_USER,
        "replication",
        password,
    );
    // Only the password is used; a URI through `-rw` would invite the wrong use.
    if let Some(data) = secret.data.as_mut() {
        data.retain(|key, _| matches!(key.as_str(), "username" | "password"));
    }
    secret
}

/// The status token's key in Secret `<name>-monitoring`.
pub const STATUS_TOKEN_KEY: &str = "token";

/// Secret `<name>-monitoring`: the status token (`token`) the instance managers' `/status`
/// and `/metrics` require, mounted into each pod as a file. Created once from a CSPRNG; the
/// operator reads it to ask for reports, a PodMonitor in the namespace presents it to scrape.
pub fn monitoring_secret(cluster: &Cluster, token: &str) -> Secret {
    let token = ByteString(token.as_bytes().to_vec());
    Secret {
        metadata: cluster.child_meta(cluster.monitoring_secret_name(), Component::Credentials),
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(STATUS_TOKEN_KEY.to_owned(), token)])),
        ..Secret::default()
    }
}

/// What every connection string asks of the server: TLS, a certificate the cluster's CA signed,
/// and the name dialled among its names. libpq and pgjdbc both read the CA from
/// `~/.postgresql/root.crt` unless `sslrootcert` (or `PGSSLROOTCERT`) names another file; the
/// Secret's `ca.crt` is that file.
pub const SSLMODE: &str = "verify-full";

fn credentials(
    cluster: &Cluster,
    name: String,
    user: &str,
    dbname: &str,
    password: &str,
) -> Secret {
    let host = cluster.rw_host();
    Secret {
        metadata: cluster.child_meta(name, Component::Credentials),
        type_: Some("kubernetes.io/basic-auth".to_owned()),
        data: Some(connection_data(&host, user, dbname, password)),
        ..Secret::default()
    }
}

fn connection_data(
    host: &str,
    user: &str,
    dbname: &str,
    password: &str,
) -> BTreeMap<String, ByteString> {
    let port = POSTGRES_PORT.to_string();
    let encode = |text| utf8_percent_encode(text, NON_ALPHANUMERIC).to_string();
    let uri = format!(
        "postgresql://{}:{}@{host}:{port}/{dbname}?sslmode={SSLMODE}",
        encode(user),
        encode(password)
    );
    let jdbc = format!(
        "jdbc:postgresql://{host}:{port}/{dbname}?user={}&password={}&sslmode={SSLMODE}",
        encode(user),
        encode(password)
    );
    let pgpass = format!("{host}:{port}:{dbname}:{user}:{password}\n");
    [
        ("host", host),
        ("port", port.as_str()),
        ("dbname", dbname),
        ("username", user),
        ("password", password),
        ("sslmode", SSLMODE),
        ("uri", uri.as_str()),
        ("jdbc-uri", jdbc.as_str()),
        ("pgpass", pgpass.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect()
}

fn value<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    std::str::from_utf8(&secret.data.as_ref()?.get(key)?.0).ok()
}

/// `desired` (a credentials Secret as the builder makes it) with the login `stored` holds (its
/// own, or `desired`'s when it is the one about to be created), today's keys, `ca.crt` the CA
/// certificate `ca_cert` and that CA's fingerprint recorded. The password is the stored one:
/// never a new one. The metadata is `desired`'s, so the result is an apply body (nothing the
/// server keeps, no label someone else added). None when `stored` lacks part of its login
/// (edited by hand): it is left as it is.
pub fn with_ca(desired: &Secret, stored: &Secret, ca_cert: &str) -> Option<Secret> {
    let (user, dbname, password) = (
        value(stored, "username")?,
        value(stored, "dbname")?,
        value(stored, "password")?,
    );
    let host = value(stored, "host")?;
    let mut data = connection_data(host, user, dbname, password);
    data.insert(CA_CRT.to_owned(), ByteString(ca_cert.as_bytes().to_vec()));
    let mut metadata = desired.metadata.clone();
    metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            CA_FINGERPRINT_ANNOTATION.to_owned(),
            ca_fingerprint(ca_cert),
        );
    Some(Secret {
        metadata,
        type_: desired.type_.clone(),
        data: Some(data),
        ..Secret::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;
    use crate::resources::tls::recorded_ca;

    fn assert_values(secret: &Secret, want: &[(&str, &str)]) {
        for (key, value) in want {
            let data = &secret.data.as_ref().unwrap()[*key].0;
            assert_eq!(std::str::from_utf8(data).unwrap(), *value, "{key}");
        }
    }

    /// The Secret `build` makes for the minimal cluster with `password`.
    fn built(build: fn(&Cluster, &str) -> Secret, password: &str) -> Secret {
        build(&Cluster::new(&postgresql(MINIMAL)).unwrap(), password)
    }

    #[test]
    fn app_secret_has_ready_to_use_keys() {
        let secret = built(app_secret, "s3cr3t");
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-app"));
        assert_values(
            &secret,
            &[
                ("host", "demo-rw.prod.svc"),
                ("port", "5432"),
                ("dbname", "app"),
                ("username", "app"),
                ("password", "s3cr3t"),
                ("sslmode", "verify-full"),
                (
                    "uri",
                    "postgresql://app:s3cr3t@demo-rw.prod.svc:5432/app?sslmode=verify-full",
                ),
                (
                    "jdbc-uri",
                    "jdbc:postgresql://demo-rw.prod.svc:5432/app?user=app&password=s3cr3t\
                     &sslmode=verify-full",
                ),
            ],
        );
        assert_eq!(password_of(&secret).as_deref(), Some("s3cr3t"));
    }

    #[test]
    fn trust_adds_the_ca_and_keeps_the_stored_password() {
        // As stored by an operator before TLS: a plain URI, no CA.
        let mut stored = built(app_secret, "kept");
        let data = stored.data.as_mut().unwrap();
        data.insert(
            "uri".into(),
            ByteString(b"postgresql://app:kept@h:5432/app".to_vec()),
        );
        data.remove("sslmode");
        data.remove("jdbc-uri");
        assert_eq!(recorded_ca(&stored), None);

        // As the server keeps it: bookkeeping an apply body must not carry.
        stored.metadata.resource_version = Some("42".into());
        stored.metadata.managed_fields = Some(Vec::new());
        let desired = built(app_secret, "a fresh password, not used");
        let trusted = with_ca(&desired, &stored, "CA PEM").unwrap();
        assert_eq!(trusted.metadata.resource_version, None);
        assert_eq!(trusted.metadata.managed_fields, None);
        let fingerprint = ca_fingerprint("CA PEM");
        assert_eq!(recorded_ca(&trusted), Some(fingerprint.as_str()));
        assert_ne!(fingerprint, ca_fingerprint("another CA"));
        let mut want = built(app_secret, "kept");
        want.data
            .as_mut()
            .unwrap()
            .insert("ca.crt".into(), ByteString(b"CA PEM".to_vec()));
        assert_eq!(trusted.data, want.data);
        assert_eq!(trusted.metadata.name, want.metadata.name);
        assert_eq!(trusted.type_, want.type_);

        // A Secret edited by hand (no password) is left alone.
        stored.data.as_mut().unwrap().remove("password");
        assert_eq!(with_ca(&desired, &stored, "CA PEM"), None);
    }

    #[test]
    fn logins_with_reserved_characters_stay_valid_uris() {
        let secret = built(superuser_secret, "a/b@c");
        assert_values(
            &secret,
            &[(
                "uri",
                "postgresql://postgres:a%2Fb%40c@demo-rw.prod.svc:5432/postgres?sslmode=verify-full",
            )],
        );
    }

    #[test]
    fn replication_secret_holds_only_the_role_and_its_password() {
        let secret = built(replication_secret, "s3cret");
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-replication"));
        let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
        assert_eq!(keys, ["password", "username"]);
        assert_values(
            &secret,
            &[("username", "tusk_replication"), ("password", "s3cret")],
        );
    }

    #[test]
    fn monitoring_secret_holds_only_the_token() {
        let secret = built(monitoring_secret, "t0ken");
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-monitoring"));
        let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
        assert_eq!(keys, ["token"]);
        assert_values(&secret, &[("token", "t0ken")]);
    }

    #[test]
    fn superuser_secret_is_for_postgres() {
        let secret = built(superuser_secret, "pw");
        assert_eq!(secret.metadata.name.as_deref(), Some("demo-superuser"));
        assert_values(&secret, &[("username", "postgres"), ("dbname", "postgres")]);
    }

    #[test]
    fn passwords_are_long_alphanumeric_and_distinct() {
        let a = generate_password();
        let b = generate_password();
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
    }
}
