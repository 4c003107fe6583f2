//! Declared passwords (issue 47): a verifier written where the pod mounts Secret
//! `<name>-verifiers` becomes the role's password on the running primary, without a restart;
//! the old password stops working; a password changed by hand in SQL is put back.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn a_declared_verifier_becomes_the_roles_password_and_a_change_by_hand_is_put_back() {
    let mut cluster = single_primary();
    let member = cluster.member("demo-0");
    let manager = member.manager_pid();
    let dir = std::path::PathBuf::from(member.env_var("TUSK_VERIFIERS_DIR").unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let (app, superuser) = ("new app password", "new superuser password");
    let declare = |file: &str, password: &str| {
        let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
        std::fs::write(dir.join(file), &verifier).unwrap();
        verifier
    };
    let app_verifier = declare("app", app);
    declare("superuser", superuser);

    // Within the manager's 5 s cycle: the new passwords log in, the old ones do not.
    wait_for(
        "the app's declared password",
        Duration::from_secs(30),
        || member.psql_as("app", app, "appdb", "SELECT 1").is_ok(),
    );
    wait_for(
        "the superuser's declared password",
        Duration::from_secs(30),
        || {
            member
                .psql_as("postgres", superuser, "postgres", "SELECT 1")
                .is_ok()
        },
    );
    let old = member.psql_as("app", APP_PASSWORD, "appdb", "SELECT 1");
    assert!(
        old.as_ref()
            .is_err_and(|e| e.contains("password authentication failed")),
        "the old app password still works: {old:?}"
    );
    assert!(
        member.psql("SELECT 1").is_err(),
        "the old superuser password still works"
    );
    let stored = "SELECT rolpassword FROM pg_authid WHERE rolname = 'app'";
    assert_eq!(
        member.psql_as("postgres", superuser, "postgres", stored),
        Ok(app_verifier.clone()),
        "the declared verifier itself, not one made again"
    );

    // Changed by hand: put back to the declared one.
    member
        .psql_as(
            "postgres",
            superuser,
            "postgres",
            "ALTER ROLE app PASSWORD 'by hand'",
        )
        .unwrap();
    wait_for(
        "the app's password put back",
        Duration::from_secs(30),
        || member.psql_as("postgres", superuser, "postgres", stored) == Ok(app_verifier.clone()),
    );
    assert!(
        member
            .psql_as("app", "by hand", "appdb", "SELECT 1")
            .is_err()
    );
    assert_eq!(member.manager_pid(), manager, "no restart");

    // Not a verifier (a password written in clear by mistake): ignored, never set.
    std::fs::write(dir.join("app"), "plaintext").unwrap();
    wait_for(
        "the manager to pass over the file",
        Duration::from_secs(15),
        || {
            std::fs::read_to_string(member.log.clone())
                .is_ok_and(|log| log.contains("not a SCRAM-SHA-256 verifier"))
        },
    );
    assert!(member.psql_as("app", app, "appdb", "SELECT 1").is_ok());
}

#[test]
fn the_first_start_makes_the_roles_from_the_verifiers_alone() {
    // As the operator's pods start: no superuser or app password in the environment, only
    // their verifiers where Secret <name>-verifiers is mounted.
    let mut cluster = Cluster::new(&["demo-0"]);
    cluster.set_lease("demo-0", true);
    let member = cluster.member("demo-0");
    member.set_env("POSTGRES_PASSWORD", None);
    member.set_env("TUSK_APP_PASSWORD", None);
    let dir = std::path::PathBuf::from(member.env_var("TUSK_VERIFIERS_DIR").unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    for (file, password) in [("superuser", SUPERUSER_PASSWORD), ("app", APP_PASSWORD)] {
        let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
        std::fs::write(dir.join(file), verifier).unwrap();
    }
    member.start();
    member.wait_ready_as("primary", Duration::from_secs(90));
    assert_eq!(
        member.psql("SELECT current_user").as_deref(),
        Ok("postgres")
    );
    assert_eq!(
        member
            .psql_as("app", APP_PASSWORD, "appdb", "SELECT current_user")
            .as_deref(),
        Ok("app")
    );
}
