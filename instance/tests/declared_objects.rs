//! Declared roles and databases (issue 49) on a real primary, through the file that stands in
//! for Secret `<name>-declared`: made, drift put back, a password rotated without a restart,
//! a role no longer declared disabled, `absent` dropped (a role that still owns a database
//! reported, then dropped once the database is gone), and a role Tusk never declared untouched.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn verifier(password: &str) -> String {
    postgres_protocol::password::scram_sha_256(password.as_bytes())
}

fn role(name: &str, password: Option<&str>, in_roles: &[&str]) -> Value {
    json!({
        "name": name, "login": password.is_some(), "inherit": true, "createDb": false,
        "createRole": false, "connectionLimit": -1, "inRoles": in_roles,
        "verifier": password.map(verifier),
    })
}

fn shop(ensure: &str) -> Value {
    json!({
        "name": "shop", "ensure": ensure, "owner": "author", "encoding": "UTF8", "locale": "C",
        "schemas": [{"name": "sales"}],
        "extensions": [{"name": "citext", "version": "1.5", "schema": "sales"}],
    })
}

fn declare(member: &Instance, document: &Value) {
    let path = member.env_var("TUSK_DECLARED_FILE").unwrap();
    let staged = format!("{path}.new");
    std::fs::write(&staged, document.to_string()).unwrap();
    std::fs::rename(&staged, path).unwrap();
}

/// The manager's report of `name` in `/status`: (state, message).
fn reported(member: &Instance, kind: &str, name: &str) -> Option<(String, String)> {
    let declared = member.status_field("declared");
    declared.as_array()?.iter().find_map(|object| {
        (object["kind"] == kind && object["name"] == name).then(|| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (text(&object["state"]), text(&object["message"]))
        })
    })
}

fn wait_state(member: &Instance, kind: &str, name: &str, state: &str) {
    wait_for(&format!("{kind} {name} {state}"), WAIT, || {
        reported(member, kind, name).is_some_and(|(s, _)| s == state)
    });
}

#[test]
fn declared_roles_and_databases_are_kept_and_only_they() {
    let mut cluster = single_primary();
    let member = cluster.member("demo-0");
    let manager = member.manager_pid();
    member
        .psql("CREATE ROLE bystander LOGIN PASSWORD 'by'")
        .unwrap();
    let mut writers = role("writers", None, &[]);
    writers["createDb"] = json!(true);
    let mut reader = role("reader", Some("r1"), &["pg_read_all_data"]);
    reader["connectionLimit"] = json!(3);
    reader["validUntil"] = json!("2099-01-01T00:00:00Z");
    let author = role("author", Some("a1"), &["writers"]);
    let mut document = json!({
        "roles": [writers, reader, author],
        "databases": [shop("present")],
    });
    declare(member, &document);
    for (kind, name) in [
        ("role", "writers"),
        ("role", "reader"),
        ("role", "author"),
        ("database", "shop"),
    ] {
        wait_state(member, kind, name, "Ready");
    }
    let facts = "SELECT rolcanlogin, rolcreatedb, rolconnlimit, rolvaliduntil::date, \
                 pg_has_role('reader', 'pg_read_all_data', 'MEMBER'), pg_has_role('author', 'writers', 'MEMBER') \
                 FROM pg_roles WHERE rolname IN ('reader', 'writers') ORDER BY rolname";
    assert_eq!(
        member.psql(facts).as_deref(),
        Ok("t|f|3|2099-01-01|t|t\nf|t|-1|infinity|t|t")
    );
    assert_eq!(
        member
            .psql_as("reader", "r1", "shop", "SELECT current_user")
            .as_deref(),
        Ok("reader")
    );
    let made = "SELECT d.datname, pg_get_userbyid(d.datdba), pg_encoding_to_char(d.encoding), d.datcollate \
                FROM pg_database d WHERE d.datname = 'shop'";
    assert_eq!(member.psql(made).as_deref(), Ok("shop|author|UTF8|C"));
    let inside = "SELECT n.nspname, pg_get_userbyid(n.nspowner), e.extversion FROM pg_namespace n \
                  JOIN pg_extension e ON e.extnamespace = n.oid WHERE e.extname = 'citext'";
    assert_eq!(
        member.psql_as("author", "a1", "shop", inside).as_deref(),
        Ok("sales|author|1.5")
    );

    // Changed by hand: put back.
    for sql in [
        "ALTER ROLE reader CONNECTION LIMIT 10 CREATEROLE",
        "REVOKE pg_read_all_data FROM reader",
        "GRANT writers TO reader",
        "ALTER DATABASE shop OWNER TO postgres",
    ] {
        member.psql(sql).unwrap();
    }
    wait_for("the drift put back", WAIT, || {
        member.psql(facts).as_deref() == Ok("t|f|3|2099-01-01|t|t\nf|t|-1|infinity|t|t")
            && member
                .psql("SELECT pg_has_role('reader', 'writers', 'MEMBER')")
                .as_deref()
                == Ok("f")
            && member.psql(made).as_deref() == Ok("shop|author|UTF8|C")
    });
    let log = std::fs::read_to_string(&member.log).unwrap();
    assert!(
        log.contains("role reader: createRole, connectionLimit put back as declared"),
        "{log}"
    );

    // A new password (and an extension update): the old one refused, the new one let in, no restart.
    document["roles"][1]["verifier"] = json!(verifier("r2"));
    document["databases"][0]["extensions"][0]["version"] = json!("1.6");
    let rotated = Instant::now();
    declare(member, &document);
    wait_for("the rotated password", WAIT, || {
        member.psql_as("reader", "r2", "shop", "SELECT 1").is_ok()
    });
    println!(
        "declared password working {:.2?} after the declaration changed",
        rotated.elapsed()
    );
    let old = member.psql_as("reader", "r1", "shop", "SELECT 1");
    assert!(old.is_err_and(|e| e.contains("password authentication failed")));
    wait_for("citext 1.6", WAIT, || {
        member.psql_as("author", "a1", "shop", inside).as_deref() == Ok("sales|author|1.6")
    });

    // No longer declared: disabled, not dropped. Declared absent while it owns a database:
    // reported with the server's reason, then dropped once the database is gone.
    document["roles"] = json!([role("writers", None, &[]), {"name": "author", "ensure": "absent",
        "login": false, "inherit": true, "createDb": false, "createRole": false, "connectionLimit": -1}]);
    document["roles"][0]["ensure"] = json!("absent");
    declare(member, &document);
    wait_state(member, "role", "reader", "Disabled");
    wait_state(member, "role", "writers", "Absent");
    wait_for("author refused with the server's reason", WAIT, || {
        reported(member, "role", "author")
            .is_some_and(|(s, m)| s == "Failed" && m.contains("depend"))
    });
    assert_eq!(
        member
            .psql("SELECT rolcanlogin, rolpassword IS NULL FROM pg_authid WHERE rolname = 'reader'")
            .as_deref(),
        Ok("f|t")
    );
    document["databases"] = json!([shop("absent")]);
    declare(member, &document);
    wait_state(member, "database", "shop", "Absent");
    wait_state(member, "role", "author", "Absent");
    assert_eq!(
        member
            .psql("SELECT count(*) FROM pg_roles WHERE rolname IN ('author', 'writers')")
            .as_deref(),
        Ok("0")
    );
    assert_eq!(
        member
            .psql("SELECT count(*) FROM pg_database WHERE datname = 'shop'")
            .as_deref(),
        Ok("0")
    );

    // Never declared: untouched through all of it.
    assert_eq!(
        member
            .psql_as("bystander", "by", "postgres", "SELECT current_user")
            .as_deref(),
        Ok("bystander")
    );
    assert_eq!(member.manager_pid(), manager, "no restart");
}
