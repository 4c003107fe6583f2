//! Which postgresql.conf settings `spec.parameters` may hold. Refused at `kubectl apply` by the
//! CEL rules built here, and again by the ConfigMap builder (`resources::config`), which also
//! covers clusters stored before a rule existed.

/// postgresql.conf keys that Tusk sets itself; a spec that sets them is rejected at apply time.
pub const OPERATOR_OWNED_PARAMETERS: &[&str] = &[
    "port",
    "listen_addresses",
    "data_directory",
    "hba_file",
    "ident_file",
    "config_file",
    "external_pid_file",
    "unix_socket_directories",
    "unix_socket_group",
    "unix_socket_permissions",
    "include",
    "include_dir",
    "synchronous_standby_names",
    "include_if_exists",
    "ssl",
    "ssl_cert_file",
    "ssl_key_file",
    "ssl_ca_file",
    // Files the server reads or writes: none of them may be named by whoever edits the spec
    // (issue 47: log_directory and log_filename could write over files in PGDATA, such as
    // postgresql.auto.conf). Logs go to the container's stderr.
    "ssl_crl_file",
    "ssl_crl_dir",
    "ssl_dh_params_file",
    "logging_collector",
    "log_directory",
    "log_filename",
    // SCRAM only: an md5 hash is as good as the password to whoever reads it.
    "password_encryption",
    // spec.backup.walArchive sets these (archive_command is refused as code-running too).
    "archive_mode",
    "archive_timeout",
];

/// Settings that run shell commands or load code as the postgres user: whoever may edit the
/// PostgreSQL object must not gain that. From the PostgreSQL 14-18 documentation (server
/// configuration, and the PL/Perl and PL/Tcl settings that run code when an interpreter starts).
pub const CODE_RUNNING_PARAMETERS: &[&str] = &[
    "archive_command",
    "archive_library",
    "archive_cleanup_command",
    "restore_command",
    "recovery_end_command",
    "ssl_passphrase_command",
    "local_preload_libraries",
    "dynamic_library_path",
    "extension_control_path",
    "jit_provider",
    "oauth_validator_libraries",
    "plperl.on_init",
    "plperl.on_plperl_init",
    "plperl.on_plperlu_init",
    "pltcl.start_proc",
    "pltclu.start_proc",
];

/// Settings that break what replication and failover rely on, refused whatever their value,
/// each with why. Recovery targets and delays belong to Tusk (a standby must replay everything
/// it received, at once, to be promoted with it); archiving is Tusk's too (an `archive_mode`
/// without a command keeps WAL for ever); `fsync` and `full_page_writes` exist only to be
/// turned off, which loses acknowledged commits or corrupts pages on a crash; `hot_standby`
/// off leaves the managers unable to read a standby's position.
pub const HA_BREAKING_PARAMETERS: &[(&str, &str)] = &[
    (
        "recovery_target",
        "recovery is Tusk's: a standby must replay all it receives",
    ),
    (
        "recovery_target_name",
        "recovery is Tusk's: a standby must replay all it receives",
    ),
    (
        "recovery_target_time",
        "recovery is Tusk's: a standby must replay all it receives",
    ),
    (
        "recovery_target_xid",
        "recovery is Tusk's: a standby must replay all it receives",
    ),
    (
        "recovery_target_lsn",
        "recovery is Tusk's: a standby must replay all it receives",
    ),
    (
        "recovery_target_inclusive",
        "recovery is Tusk's: a standby must replay all it receives",
    ),
    (
        "recovery_target_timeline",
        "recovery is Tusk's: standbys follow the latest timeline",
    ),
    (
        "recovery_target_action",
        "recovery is Tusk's: only the Lease's holder is promoted",
    ),
    (
        "recovery_min_apply_delay",
        "a delayed standby cannot be promoted with every commit",
    ),
    (
        "archive_mode",
        "without an archive command it keeps every WAL segment until the disk is full",
    ),
    (
        "hot_standby",
        "the instance managers read each standby's positions over a connection",
    ),
    (
        "fsync",
        "turning it off loses acknowledged commits (or corrupts the database) on a crash",
    ),
    (
        "full_page_writes",
        "turning it off can corrupt pages on a crash and breaks pg_rewind",
    ),
];

/// Settings allowed only with some values: (key, values allowed, why).
pub const HA_VALUE_RULES: &[(&str, &[&str], &str)] = &[
    (
        "synchronous_commit",
        &["on", "remote_apply"],
        "off, local or remote_write acknowledge commits that no standby holds durably (and \
         void durability required)",
    ),
    (
        "wal_level",
        &["replica", "logical"],
        "minimal writes no WAL for standbys",
    ),
];

/// Settings that must stay at least at PostgreSQL's default of 10: the members stream, clone
/// and keep a slot each through them.
pub const HA_MINIMUMS: &[&str] = &["max_wal_senders", "max_replication_slots"];

/// Settings that load libraries, allowed with these values only.
pub const PRELOAD_PARAMETERS: &[&str] = &["shared_preload_libraries", "session_preload_libraries"];

/// Modules of the official image's contrib that are loaded by name from its own library
/// directory (`dynamic_library_path` cannot be changed, so a name cannot point elsewhere).
pub const PRELOADABLE_LIBRARIES: &[&str] = &[
    "auth_delay",
    "auto_explain",
    "passwordcheck",
    "pg_prewarm",
    "pg_stat_statements",
];

fn cel_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("'{i}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// CEL: no key of [`OPERATOR_OWNED_PARAMETERS`].
pub fn owned_rule() -> String {
    format!(
        "self.all(k, !(k in {}))",
        cel_list(OPERATOR_OWNED_PARAMETERS)
    )
}

pub fn owned_message() -> String {
    format!(
        "spec.parameters must not set keys Tusk manages: {}",
        OPERATOR_OWNED_PARAMETERS.join(", ")
    )
}

/// CEL: no key of [`CODE_RUNNING_PARAMETERS`].
pub fn no_code_running_rule() -> String {
    format!("self.all(k, !(k in {}))", cel_list(CODE_RUNNING_PARAMETERS))
}

/// CEL: [`PRELOAD_PARAMETERS`] list only [`PRELOADABLE_LIBRARIES`], bare or double-quoted.
pub fn preload_rule() -> String {
    let names = PRELOADABLE_LIBRARIES.join("|");
    let item = format!(r#"(?:(?:{names})|"(?:{names})")"#);
    let pattern = format!(r"^\s*(?:{item}(?:\s*,\s*{item})*)?\s*$");
    format!(
        "{}.all(p, !(p in self) || self[p].matches('{}'))",
        cel_list(PRELOAD_PARAMETERS),
        pattern.replace('\\', "\\\\")
    )
}

pub fn code_running_message() -> String {
    format!(
        "spec.parameters must not set settings that run commands or load code as the postgres \
         user: {}",
        CODE_RUNNING_PARAMETERS.join(", ")
    )
}

pub fn preload_message() -> String {
    format!(
        "spec.parameters {} may only list {}",
        PRELOAD_PARAMETERS.join(" and "),
        PRELOADABLE_LIBRARIES.join(", ")
    )
}

/// CEL: no key of [`HA_BREAKING_PARAMETERS`].
pub fn ha_breaking_rule() -> String {
    let keys: Vec<&str> = HA_BREAKING_PARAMETERS.iter().map(|(k, _)| *k).collect();
    format!("self.all(k, !(k in {}))", cel_list(&keys))
}

pub fn ha_breaking_message() -> String {
    let reasons: Vec<String> = HA_BREAKING_PARAMETERS
        .iter()
        .map(|(key, why)| format!("{key} ({why})"))
        .collect();
    format!(
        "spec.parameters must not set settings that break replication and failover: {}",
        reasons.join("; ")
    )
}

/// CEL: the [`HA_VALUE_RULES`] and [`HA_MINIMUMS`].
pub fn ha_values_rule() -> String {
    let mut clauses: Vec<String> = HA_VALUE_RULES
        .iter()
        .map(|(key, allowed, _)| {
            format!(
                "(!('{key}' in self) || self['{key}'] in {})",
                cel_list(allowed)
            )
        })
        .collect();
    clauses.extend(HA_MINIMUMS.iter().map(|key| {
        format!(
            "(!('{key}' in self) || (self['{key}'].matches('^[0-9]+$') && int(self['{key}']) >= 10))"
        )
    }));
    clauses.join(" && ")
}

pub fn ha_values_message() -> String {
    let mut parts: Vec<String> = HA_VALUE_RULES
        .iter()
        .map(|(key, allowed, why)| format!("{key} may be {} ({why})", allowed.join(" or ")))
        .collect();
    parts.push(format!(
        "{} must be at least 10 (the members stream, clone and keep a slot each)",
        HA_MINIMUMS.join(" and ")
    ));
    format!("spec.parameters: {}", parts.join("; "))
}

/// Why `key = value` may not be in `spec.parameters` on replication grounds, if it may not.
fn ha_refusal(key: &str, value: &str) -> Option<String> {
    if let Some((_, why)) = HA_BREAKING_PARAMETERS.iter().find(|(k, _)| *k == key) {
        return Some(format!("{key} breaks replication and failover: {why}"));
    }
    if let Some((_, allowed, why)) = HA_VALUE_RULES.iter().find(|(k, _, _)| *k == key)
        && !allowed.contains(&value)
    {
        return Some(format!("{key} may be {}: {why}", allowed.join(" or ")));
    }
    if HA_MINIMUMS.contains(&key) && !value.parse::<u32>().is_ok_and(|n| n >= 10) {
        return Some(format!("{key} must be at least 10"));
    }
    None
}

/// Why `key = value` may not be in `spec.parameters`, if it may not: it runs code, or it
/// breaks replication and failover.
pub fn refusal(key: &str, value: &str) -> Option<String> {
    if CODE_RUNNING_PARAMETERS.contains(&key) {
        return Some(code_running_message());
    }
    if let Some(why) = ha_refusal(key, value) {
        return Some(why);
    }
    let allowed = |item: &str| {
        let name = item.trim_matches(|c: char| c.is_ascii_whitespace());
        let name = name
            .strip_prefix('"')
            .and_then(|n| n.strip_suffix('"'))
            .unwrap_or(name);
        PRELOADABLE_LIBRARIES.contains(&name)
    };
    let blank = value
        .trim_matches(|c: char| c.is_ascii_whitespace())
        .is_empty();
    if PRELOAD_PARAMETERS.contains(&key) && !blank && !value.split(',').all(allowed) {
        return Some(preload_message());
    }
    None
}
