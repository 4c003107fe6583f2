use super::*;

/// How a TLS connection for (`database`, `user`) is authenticated: the method of the first
/// `hostssl` line that matches, as PostgreSQL reads the file; `None` when no line does (refused).
/// `database` `replication` stands for a physical replication connection.
fn method(hba: &str, database: &str, user: &str) -> Option<String> {
    hba.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.first() == Some(&"hostssl")).then_some(fields)
        })
        .find(|f| {
            let db_matches = match f[1] {
                "all" => database != "replication",
                db => db == database,
            };
            db_matches && (f[2] == "all" || f[2] == user)
        })
        .map(|f| f[4..].join(" "))
}

const CERT_AND_PASSWORD: &str = "scram-sha-256 clientcert=verify-full";

#[test]
fn the_superuser_logs_in_over_the_network_only_when_asked_or_with_a_certificate_of_the_ca() {
    let own_ca = render_hba(true, false);
    assert_eq!(
        method(&own_ca, "app", "postgres").as_deref(),
        Some(CERT_AND_PASSWORD)
    );
    assert_eq!(
        method(&own_ca, "postgres", "postgres").as_deref(),
        Some(CERT_AND_PASSWORD)
    );
    let brought = render_hba(false, false);
    assert_eq!(
        method(&brought, "app", "postgres").as_deref(),
        Some("reject")
    );
    for certificates in [true, false] {
        let open = render_hba(certificates, true);
        assert_eq!(
            method(&open, "app", "postgres").as_deref(),
            Some("scram-sha-256")
        );
    }
}

#[test]
fn each_machine_role_gets_in_only_where_its_work_is() {
    let hba = render_hba(true, false);
    let borrowed = "scram-sha-256 clientcert=verify-ca";
    // Replication only.
    assert_eq!(
        method(&hba, "replication", "tusk_replication").as_deref(),
        Some(CERT_AND_PASSWORD)
    );
    for database in ["postgres", "app"] {
        assert_eq!(
            method(&hba, database, "tusk_replication").as_deref(),
            Some("reject")
        );
    }
    // The rewind's questions and files, in `postgres` only.
    assert_eq!(
        method(&hba, "postgres", "tusk_rewind").as_deref(),
        Some(borrowed)
    );
    assert_eq!(
        method(&hba, "app", "tusk_rewind").as_deref(),
        Some("reject")
    );
    assert_eq!(method(&hba, "replication", "tusk_rewind"), None);
    // Dumps read every database.
    assert_eq!(
        method(&hba, "app", "tusk_backup").as_deref(),
        Some(borrowed)
    );
    assert_eq!(method(&hba, "replication", "tusk_backup"), None);
    // Applications: a password over TLS; no replication.
    assert_eq!(method(&hba, "app", "app").as_deref(), Some("scram-sha-256"));
    assert_eq!(method(&hba, "replication", "app"), None);
    let brought = render_hba(false, false);
    assert_eq!(
        method(&brought, "postgres", "tusk_rewind").as_deref(),
        Some("scram-sha-256")
    );
    assert_eq!(
        method(&brought, "app", "tusk_replication").as_deref(),
        Some("reject")
    );
}

#[test]
fn plaintext_is_refused_before_any_rule_could_accept_it() {
    for (certificates, superuser) in [(true, false), (false, true)] {
        let hba = render_hba(certificates, superuser);
        let network: Vec<&str> = hba.lines().filter(|l| l.starts_with("host")).collect();
        assert!(
            network[..2]
                .iter()
                .all(|l| l.starts_with("hostnossl") && l.ends_with("reject")),
            "{hba}"
        );
        assert!(
            network[2..].iter().all(|l| l.starts_with("hostssl")),
            "{hba}"
        );
    }
}
