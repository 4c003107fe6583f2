//! `postgresql.auto.conf`, where the manager keeps its standby settings and the preferred
//! synchronous standbys: the server reads `config_file` from the ConfigMap (which the manager
//! cannot extend), while `auto.conf` is always read from PGDATA last and is where
//! `pg_basebackup -R` / `pg_rewind -R` put them too. Only the manager's own keys are replaced;
//! `ALTER SYSTEM` settings are kept. Also the one way the manager writes a private file.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::Error;

const AUTO_CONF: &str = "postgresql.auto.conf";

/// Sets `settings` in `postgresql.auto.conf`, first dropping every line that sets one of
/// `owned` (the keys the caller manages), keeping the others.
pub fn set(pgdata: &Path, owned: &[&str], settings: &[(&str, String)]) -> Result<(), Error> {
    let current = std::fs::read_to_string(pgdata.join(AUTO_CONF)).unwrap_or_default();
    replace_auto_conf(pgdata, &replace_managed_settings(&current, owned, settings))
}

/// Drops `keys` from `postgresql.auto.conf`; the file is left untouched when none is there.
/// Only while no server runs: `ALTER SYSTEM` rewrites the file from the server's copy.
pub fn remove(pgdata: &Path, keys: &[&str]) -> Result<bool, Error> {
    let current = match std::fs::read_to_string(pgdata.join(AUTO_CONF)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("reading postgresql.auto.conf")(e)),
    };
    let kept = without_keys(&current, keys);
    if kept == current {
        return Ok(false);
    }
    replace_auto_conf(pgdata, &kept)?;
    Ok(true)
}

/// Replaces `postgresql.auto.conf` atomically.
fn replace_auto_conf(pgdata: &Path, content: &str) -> Result<(), Error> {
    let tmp = pgdata.join("postgresql.auto.conf.tusk-tmp");
    write_private(&tmp, content.as_bytes())?;
    std::fs::rename(&tmp, pgdata.join(AUTO_CONF))
        .map_err(Error::io("replacing postgresql.auto.conf"))
}

/// `current`'s lines but those setting one of `keys`, each ending in a newline.
fn without_keys(current: &str, keys: &[&str]) -> String {
    current
        .lines()
        .filter(|line| {
            let key = line.split('=').next().unwrap_or("").trim();
            !keys.contains(&key)
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

fn replace_managed_settings(current: &str, owned: &[&str], settings: &[(&str, String)]) -> String {
    let mut out = without_keys(current, owned);
    for (key, value) in settings {
        out.push_str(&format!("{key} = {}\n", conf_string(value)));
    }
    out
}

/// A postgresql.conf string: quotes doubled, backslashes escaped.
fn conf_string(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

/// Creates `path` with mode 0600 (from the start: never briefly readable by others).
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(Error::io(format!("creating {}", path.display())))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(Error::io(format!("writing {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_settings_replace_old_ones_and_keep_the_rest() {
        let current = "# Do not edit\nwork_mem = '8MB'\nprimary_conninfo = 'host=old'\n\
                       primary_slot_name = 'x'\n";
        let updated = replace_managed_settings(
            current,
            &["primary_conninfo", "primary_slot_name"],
            &[("primary_conninfo", "host='new' port='5432'".to_string())],
        );
        assert_eq!(
            updated,
            "# Do not edit\nwork_mem = '8MB'\nprimary_conninfo = 'host=''new'' port=''5432'''\n"
        );
    }

    #[test]
    fn removing_settings_keeps_the_other_lines_and_leaves_a_clean_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let auto = dir.path().join(AUTO_CONF);
        assert!(!remove(dir.path(), &["a"]).unwrap());
        std::fs::write(&auto, "# Do not edit\nwork_mem = '8MB'\na = 'x'\n").unwrap();
        assert!(remove(dir.path(), &["a"]).unwrap());
        let kept = std::fs::read_to_string(&auto).unwrap();
        assert_eq!(kept, "# Do not edit\nwork_mem = '8MB'\n");
        assert!(!remove(dir.path(), &["a"]).unwrap());
    }
}
