use super::*;
use crate::resources::fixtures::*;

const SPEC: &str = "
storage: {size: 1Gi}
roles:
  - {name: app_reader, inRoles: [pg_read_all_data], connectionLimit: 5}
  - {name: writers, login: false}
  - {name: billing, passwordSecret: {name: billing-password}}
  - {name: gone, ensure: absent}
databases:
  - {name: shop, owner: billing, encoding: UTF8, extensions: [{name: citext, version: '1.6'}], schemas: [{name: sales}]}
";

fn passwords() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app_reader".to_owned(), "reader-pw".to_owned()),
        ("billing".to_owned(), "billing-pw".to_owned()),
    ])
}

#[test]
fn each_role_takes_its_password_from_its_own_source() {
    let pg = postgresql(SPEC);
    let cluster = Cluster::new(&pg).unwrap();
    let sources: Vec<PasswordSource> = pg
        .spec
        .roles
        .iter()
        .map(|r| password_source(&cluster, r))
        .collect();
    assert_eq!(
        sources,
        [
            PasswordSource::Generated("demo-role-app-reader".into()),
            PasswordSource::None,
            PasswordSource::Named("billing-password".into()),
            PasswordSource::None,
        ]
    );
}

#[test]
fn the_document_carries_verifiers_never_passwords() {
    let pg = postgresql(SPEC);
    let cluster = Cluster::new(&pg).unwrap();
    let doc = document(
        &cluster,
        &pg.spec.roles,
        &pg.spec.databases,
        &passwords(),
        None,
    )
    .unwrap();
    let secret = declared_secret(&cluster, &doc);
    let json = String::from_utf8(secret.data.unwrap()[DOCUMENT_KEY].0.clone()).unwrap();
    assert!(
        !json.contains("reader-pw") && !json.contains("billing-pw"),
        "{json}"
    );
    let reader = &doc.roles[0];
    assert!(
        reader
            .verifier
            .as_deref()
            .is_some_and(|v| v.starts_with("SCRAM-SHA-256$4096:"))
    );
    assert_eq!(
        (reader.connection_limit, reader.in_roles.as_slice()),
        (5, &["pg_read_all_data".to_owned()][..])
    );
    assert_eq!(doc.roles[1].verifier, None, "a group has no password");
    assert_eq!(doc.roles[3].ensure, contract::Ensure::Absent);
    assert_eq!(
        doc.databases[0].extensions[0].version.as_deref(),
        Some("1.6")
    );
    assert_eq!(secret.metadata.name.as_deref(), Some("demo-declared"));
}

#[test]
fn a_verifier_is_made_again_only_for_a_changed_password() {
    let pg = postgresql(SPEC);
    let cluster = Cluster::new(&pg).unwrap();
    let (roles, databases) = (&pg.spec.roles, &pg.spec.databases);
    let first = document(&cluster, roles, databases, &passwords(), None).unwrap();
    let again = document(&cluster, roles, databases, &passwords(), Some(&first)).unwrap();
    assert_eq!(
        again, first,
        "the same passwords: the same document, no write"
    );
    let mut rotated = passwords();
    rotated.insert("billing".into(), "new-billing-pw".into());
    let next = document(&cluster, roles, databases, &rotated, Some(&first)).unwrap();
    assert_eq!(next.roles[0].verifier, first.roles[0].verifier);
    assert_ne!(next.roles[2].verifier, first.roles[2].verifier);
}

#[test]
fn a_role_whose_secret_has_no_password_stops_the_document() {
    let pg = postgresql(SPEC);
    let cluster = Cluster::new(&pg).unwrap();
    let mut missing = passwords();
    missing.remove("billing");
    let err = document(&cluster, &pg.spec.roles, &pg.spec.databases, &missing, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "role billing: Secret billing-password has no key password"
    );
}

#[test]
fn a_generated_secret_holds_the_login_only() {
    let pg = postgresql(SPEC);
    let cluster = Cluster::new(&pg).unwrap();
    let secret = generated_role_secret(&cluster, "app_reader", "pw");
    let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["password", "username"]);
    assert_eq!(
        secret.metadata.name.as_deref(),
        Some("demo-role-app-reader")
    );
    assert_eq!(secret.metadata.owner_references.unwrap()[0].name, "demo");
}
