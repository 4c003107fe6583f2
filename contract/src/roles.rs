//! The database roles Tusk's own programs log in as, written once: the instance manager makes
//! them, the operator's `pg_hba.conf` and agent Jobs name them, and tests make them as the
//! manager does. What each may do, and why, is `tusk-instance`'s `machine_roles`.

/// Streams and clones: replication connections only.
pub const REPLICATION_USER: &str = "tusk_replication";
/// Serves a former primary's rewind from database `postgres`.
pub const REWIND_USER: &str = "tusk_rewind";
/// Looks up the password verifiers of the roles clients log in as through the pooler
/// (PgBouncer's `auth_user`): executes `tusk_pooler.lookup(name)` and nothing else, by
/// certificate only.
pub const POOLER_USER: &str = "tusk_pooler";
/// The schema of the lookup function, in every database the pooler serves.
pub const POOLER_SCHEMA: &str = "tusk_pooler";
/// Reads every database for logical backups.
pub const BACKUP_USER: &str = "tusk_backup";
/// The new major's side of an online upgrade reads the old primary through it: its roles
/// (`pg_authid`, for the password verifiers), schema and rows, and subscribes. Made by the old
/// primary's manager when the copy starts and dropped when it ends; certificate only.
pub const UPGRADE_USER: &str = "tusk_upgrade";

/// Where the database pods find the declared passwords' SCRAM verifiers (Secret
/// `<name>-verifiers`), one file per role the manager keeps at its declared password.
pub const VERIFIERS_DIR: &str = "/var/run/secrets/tusk/verifiers";
/// Secret `<cluster>-verifiers`, which holds them (mounted, and followed through the API by the
/// primary's manager).
pub fn verifiers_secret_name(cluster: &str) -> String {
    format!("{cluster}-verifiers")
}
/// The superuser's verifier, in [`VERIFIERS_DIR`].
pub const SUPERUSER_VERIFIER_FILE: &str = "superuser";
/// The application owner's verifier, in [`VERIFIERS_DIR`].
pub const APP_VERIFIER_FILE: &str = "app";

/// What `tusk_rewind` is, besides its password (ALTER ROLE puts an existing role back).
pub const REWIND_OPTIONS: &str = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION";

/// What `tusk_backup` is, besides its password (ALTER ROLE puts an existing role back).
pub const BACKUP_OPTIONS: &str =
    "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION BYPASSRLS INHERIT";

/// What pg_rewind calls on its source (PostgreSQL's documentation of pg_rewind).
const REWIND_FUNCTIONS: [&str; 4] = [
    "pg_catalog.pg_ls_dir(text, boolean, boolean)",
    "pg_catalog.pg_stat_file(text, boolean)",
    "pg_catalog.pg_read_binary_file(text)",
    "pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean)",
];

/// The statements that give the roles (which exist) their grants; idempotent.
pub fn grants() -> Vec<String> {
    let backup = BACKUP_USER;
    let mut statements: Vec<String> = REWIND_FUNCTIONS
        .iter()
        .map(|f| format!("GRANT EXECUTE ON FUNCTION {f} TO {REWIND_USER}"))
        .collect();
    statements.extend([
        format!("GRANT pg_read_all_data, pg_read_all_stats TO {backup}"),
        format!("ALTER ROLE {backup} SET lo_compat_privileges = on"),
    ]);
    statements
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rewind_role_gets_the_rewind_functions_and_the_replication_role_nothing() {
        let grants = grants();
        let rewind: Vec<_> = grants
            .iter()
            .filter(|g| g.ends_with("TO tusk_rewind"))
            .collect();
        assert_eq!(rewind.len(), 4, "{grants:?}");
        assert!(
            rewind
                .iter()
                .all(|g| g.starts_with("GRANT EXECUTE ON FUNCTION"))
        );
        assert!(!grants.iter().any(|g| g.contains("tusk_replication")));
        for options in [REWIND_OPTIONS, BACKUP_OPTIONS] {
            assert!(options.contains("NOREPLICATION") && options.contains("NOSUPERUSER"));
        }
    }
}
