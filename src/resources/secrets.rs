//! The superuser and application credential Secrets. Passwords are generated once, from a CSPRNG,
//! and never rewritten by the operator: the database keeps the password it was initialised with.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use rand::distr::{Alphanumeric, SampleString};

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
pub const REPLICATION_USER: &str = "tusk_replication";

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

fn credentials(
    cluster: &Cluster,
    name: String,
    user: &str,
    dbname: &str,
    password: &str,
) -> Secret {
    let host = cluster.rw_host();
    let port = POSTGRES_PORT.to_string();
    let uri = format!(
        "postgresql://{user}:{}@{host}:{port}/{dbname}",
        utf8_percent_encode(password, NON_ALPHANUMERIC)
    );
    let pgpass = format!("{host}:{port}:{dbname}:{user}:{password}\n");
    let data = [
        ("host", host.as_str()),
        ("port", port.as_str()),
        ("dbname", dbname),
        ("username", user),
        ("password", password),
        ("uri", uri.as_str()),
        ("pgpass", pgpass.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect::<BTreeMap<_, _>>();
    Secret {
        metadata: cluster.child_meta(name, Component::Credentials),
        type_: Some("kubernetes.io/basic-auth".to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

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
                ("uri", "postgresql://app:s3cr3t@demo-rw.prod.svc:5432/app"),
            ],
        );
        assert_eq!(password_of(&secret).as_deref(), Some("s3cr3t"));
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
