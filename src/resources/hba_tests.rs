use super::*;

/// How a TLS connection for (`database`, `user`) is authenticated: the method of the first
/// `hostssl` (or `host`) line that matches, as PostgreSQL reads the file; `None` when no line
/// does (refused). `database` `replication` stands for a physical replication connection.
fn method(hba: &str, database: &str, user: &str) -> Option<String> {
    let listed = |field: &str, name: &str| field.split(',').any(|item| item == name);
    hba.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            matches!(fields.first(), Some(&"hostssl" | &"host")).then_some(fields)
        })
        .find(|f| {
            let db_matches = match f[1] {
                "all" => database != "replication",
                dbs => listed(dbs, database),
            };
            db_matches && (f[2] == "all" || listed(f[2], user))
        })
        .map(|f| f[4..].join(" "))
}

const CERT_AND_PASSWORD: &str = "scram-sha-256 clientcert=verify-full";

#[test]
fn the_superuser_logs_in_over_the_network_only_when_asked_or_with_a_certificate_of_the_ca() {
    let own_ca = render_hba(true, false, &[]);
    assert_eq!(
        method(&own_ca, "app", "postgres").as_deref(),
        Some(CERT_AND_PASSWORD)
    );
    assert_eq!(
        method(&own_ca, "postgres", "postgres").as_deref(),
        Some(CERT_AND_PASSWORD)
    );
    let brought = render_hba(false, false, &[]);
    assert_eq!(
        method(&brought, "app", "postgres").as_deref(),
        Some("reject")
    );
    for certificates in [true, false] {
        let open = render_hba(certificates, true, &[]);
        assert_eq!(
            method(&open, "app", "postgres").as_deref(),
            Some("scram-sha-256")
        );
    }
}

#[test]
fn each_machine_role_gets_in_only_where_its_work_is() {
    let hba = render_hba(true, false, &[]);
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
    assert_eq!(
        method(&hba, "replication", "tusk_rewind").as_deref(),
        Some("reject")
    );
    // Dumps read every database.
    assert_eq!(
        method(&hba, "app", "tusk_backup").as_deref(),
        Some(borrowed)
    );
    assert_eq!(
        method(&hba, "replication", "tusk_backup").as_deref(),
        Some("reject")
    );
    // An online upgrade's reads and subscriptions: by certificate alone, into any database
    // (a logical replication connection names its database), never physical replication.
    for database in ["postgres", "app"] {
        assert_eq!(
            method(&hba, database, "tusk_upgrade").as_deref(),
            Some("cert")
        );
    }
    assert_eq!(
        method(&hba, "replication", "tusk_upgrade").as_deref(),
        Some("reject")
    );
    assert_eq!(
        method(&render_hba(false, false, &[]), "app", "tusk_upgrade").as_deref(),
        Some("reject"),
        "no password to fall back on"
    );
    // Applications: a password over TLS; no replication.
    assert_eq!(method(&hba, "app", "app").as_deref(), Some("scram-sha-256"));
    assert_eq!(method(&hba, "replication", "app"), None);
    let brought = render_hba(false, false, &[]);
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
        let hba = render_hba(certificates, superuser, &[]);
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

#[test]
fn rules_from_the_spec_apply_to_other_roles_and_never_to_the_superuser_or_tusks() {
    // Rules written to capture every role Tusk keeps for itself, and one the user means.
    let extra = [
        "hostssl all postgres all scram-sha-256",
        "hostssl replication all all scram-sha-256",
        "hostssl all tusk_backup,tusk_rewind,tusk_replication all scram-sha-256",
        "host app app all cert",
    ]
    .map(String::from);
    for (certificates, superuser) in [(true, false), (false, false), (true, true)] {
        let plain = render_hba(certificates, superuser, &[]);
        let with = render_hba(certificates, superuser, &extra);
        for user in [
            "postgres",
            "tusk_replication",
            "tusk_rewind",
            "tusk_backup",
            "tusk_upgrade",
        ] {
            for database in ["app", "postgres", "replication"] {
                assert_eq!(
                    method(&with, database, user),
                    method(&plain, database, user),
                    "{user} into {database}:\n{with}"
                );
            }
        }
        // The user's rule comes before the last line, which admits everyone else by password.
        assert_eq!(method(&with, "app", "app").as_deref(), Some("cert"));
        assert_eq!(
            method(&with, "replication", "app").as_deref(),
            Some("scram-sha-256")
        );
        assert_eq!(
            with.lines().last(),
            Some("hostssl   all         all              all  scram-sha-256")
        );
    }
}
