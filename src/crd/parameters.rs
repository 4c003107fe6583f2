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

/// Why `key = value` may not be in `spec.parameters` on code-running grounds, if it may not.
pub fn refusal(key: &str, value: &str) -> Option<String> {
    if CODE_RUNNING_PARAMETERS.contains(&key) {
        return Some(code_running_message());
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
