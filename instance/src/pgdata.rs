//! The data directory: initdb with checksums (the roles are `roles`'), a clone with
//! `pg_basebackup`, and the standby settings.
//!
//! Standby settings go into `postgresql.auto.conf` (see `auto_conf` for why).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::auto_conf::{self, write_private};
use crate::config::slot_name;
use crate::context::Context;
use crate::decide::Upstream;
use crate::error::Error;
use crate::machine_roles::{REPLICATION_USER, REWIND_USER};
use crate::postmaster::{Listen, Postmaster};

/// Present from initdb until the first-start SQL has run, so an interrupted bootstrap is
/// redone instead of leaving a primary without its roles.
const BOOTSTRAP_PENDING: &str = "tusk.bootstrap-pending";
const MANAGED_KEYS: [&str; 3] = [
    "primary_conninfo",
    "primary_slot_name",
    "recovery_target_timeline",
];

/// Whether PGDATA holds a finished data directory (not one initdb or a restore is still
/// building).
pub fn initialized(pgdata: &Path) -> bool {
    pgdata.join("PG_VERSION").exists()
        && !pgdata.join(BOOTSTRAP_PENDING).exists()
        && !restore_marker(pgdata).exists()
}

/// The marker of a restore not finished yet (`restore.rs`): beside PGDATA, not in it, since
/// the base backup is unpacked into an empty PGDATA.
pub fn restore_marker(pgdata: &Path) -> std::path::PathBuf {
    let name = pgdata.file_name().unwrap_or_default().to_string_lossy();
    pgdata.with_file_name(format!("{name}.tusk-restore-pending"))
}

pub fn is_standby(pgdata: &Path) -> bool {
    pgdata.join("standby.signal").exists()
}

/// The database system identifier of the data in `pgdata`: the first field of
/// `global/pg_control` (a `uint64` in the machine's byte order), as PostgreSQL prints it.
pub fn system_identifier(pgdata: &Path) -> Option<String> {
    let control = std::fs::read(pgdata.join("global/pg_control")).ok()?;
    let bytes: [u8; 8] = control.get(..8)?.try_into().ok()?;
    Some(u64::from_ne_bytes(bytes).to_string())
}

/// Refuses data in `pgdata` whose system identifier is not the cluster's (`expected`, when
/// recorded): a member never runs or streams another system's database.
pub fn check_system(pgdata: &Path, expected: Option<&str>, from: &str) -> Result<(), Error> {
    let (Some(expected), Some(found)) = (expected, system_identifier(pgdata)) else {
        return Ok(());
    };
    if found == expected {
        return Ok(());
    }
    Err(Error::State(format!(
        "{from} serves database system {found}, not this cluster's {expected}: refusing to \
         follow it"
    )))
}

/// First start of the holder: initdb (unless a previous attempt got that far), then the roles
/// on a server listening only on its socket.
pub async fn initdb(ctx: &Context) -> Result<(), Error> {
    let pgdata = ctx.pgdata();
    if !pgdata.join("PG_VERSION").exists() {
        prepare_empty(pgdata)?;
        let pwfile = ctx.args.socket_dir.join("tusk.initdb-pw");
        // The declared verifier (or a password's): initdb stores a verifier as it is.
        let superuser = crate::declared_passwords::superuser(ctx)?.verifier();
        write_private(&pwfile, superuser.as_bytes())?;
        let mut cmd = ctx.tool("initdb");
        cmd.arg("-D")
            .arg(pgdata)
            .arg("--data-checksums")
            .args(["-U", "postgres", "-E", "UTF8"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["--auth-local=peer", "--auth-host=scram-sha-256"]);
        let result = ctx.reaper.run(cmd, "initdb").await;
        let _ = std::fs::remove_file(&pwfile);
        result?;
        write_private(&pgdata.join(BOOTSTRAP_PENDING), b"")?;
        tracing::info!("initdb done (data checksums on)");
    }
    let mut server = Postmaster::start(ctx, Listen::SocketOnly, None)?;
    let result = match server.wait_ready(ctx, Duration::from_secs(120)).await {
        Ok(()) => crate::roles::create_roles(ctx).await,
        Err(e) => Err(e),
    };
    server.stop(libc::SIGINT, Duration::from_secs(60)).await;
    result?;
    std::fs::remove_file(pgdata.join(BOOTSTRAP_PENDING))
        .map_err(Error::io("removing the bootstrap marker"))?;
    tracing::info!("first-start roles created");
    Ok(())
}

/// TCP keepalives and a user timeout for every connection to a peer: a peer that vanishes
/// (its node gone, a partition) is noticed in about half a minute instead of the kernel's
/// two hours, so a clone or a rewind never hangs on a dead connection.
pub const PEER_KEEPALIVES: [(&str, &str); 6] = [
    ("connect_timeout", "10"),
    ("keepalives", "1"),
    ("keepalives_idle", "10"),
    ("keepalives_interval", "5"),
    ("keepalives_count", "3"),
    ("tcp_user_timeout", "30000"),
];

/// First start of a non-holder: a copy of `from` streamed with its WAL, through the slot kept
/// for this pod (created by `-C` when the primary has not made it yet). A copy of another
/// database system than `expected` (the cluster's, when recorded) is refused and cleared.
pub async fn clone_from(ctx: &Context, from: &str, expected: Option<&str>) -> Result<(), Error> {
    let pgdata = ctx.pgdata();
    write_passfile(ctx)?;
    let slot = slot_name(ctx.me());
    let mut extra = vec![("user", REPLICATION_USER)];
    extra.extend(PEER_KEEPALIVES);
    let certificate = replication_certificate(ctx);
    extra.extend(certificate.as_ref().map_or(Vec::new(), presenting));
    let source = peer_conninfo(ctx, from, &extra);
    let attempt = |create_slot: bool| {
        prepare_empty(pgdata)?;
        let mut cmd = ctx.tool("pg_basebackup");
        cmd.arg("-D").arg(pgdata).arg("-d").arg(&source).args([
            "-X",
            "stream",
            "-S",
            &slot,
            "--checkpoint=fast",
            "-w",
        ]);
        if create_slot {
            cmd.arg("-C");
        }
        Ok::<_, Error>(cmd)
    };
    tracing::info!(from, slot, "cloning with pg_basebackup");
    match ctx.reaper.run(attempt(true)?, "pg_basebackup").await {
        Err(Error::Tool { stderr, .. }) if stderr.contains("already exists") => {
            ctx.reaper.run(attempt(false)?, "pg_basebackup").await?;
        }
        other => {
            other?;
        }
    }
    if let Err(refused) = check_system(pgdata, expected, from) {
        prepare_empty(pgdata)?;
        return Err(refused);
    }
    write_standby_config(ctx, &Upstream::named(from))?;
    tracing::info!(from, "clone done");
    Ok(())
}

/// Makes PGDATA an empty 0700 directory, removing what a failed attempt left behind.
/// PGDATA, created if absent, emptied and private: where a restore unpacks.
pub fn clear(pgdata: &Path) -> Result<(), Error> {
    prepare_empty(pgdata)
}

fn prepare_empty(pgdata: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(pgdata).map_err(Error::io(format!("creating {}", pgdata.display())))?;
    for entry in std::fs::read_dir(pgdata).map_err(Error::io("listing PGDATA"))? {
        let path = entry.map_err(Error::io("listing PGDATA"))?.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(Error::io(format!("clearing {}", path.display())))?;
    }
    std::fs::set_permissions(pgdata, std::fs::Permissions::from_mode(0o700))
        .map_err(Error::io("setting PGDATA to 0700"))
}

/// What moving PGDATA aside did.
#[derive(Debug, Default)]
pub struct Aside {
    /// Where the data directory is kept now (`None`: it could not be moved, and was cleared).
    pub kept: Option<std::path::PathBuf>,
    /// An older kept copy that was removed to make room (reported, never silently).
    pub dropped: Option<std::path::PathBuf>,
}

/// Moves PGDATA aside to `<PGDATA>.old` so a re-clone starts empty while the diverged copy is
/// kept for inspection. One copy is kept: an older one is removed first (the caller reports
/// it). When PGDATA is a volume's mount point it cannot be renamed: the re-clone then clears it.
pub fn move_aside(pgdata: &Path) -> Result<Aside, Error> {
    let mut old = pgdata.as_os_str().to_owned();
    old.push(".old");
    let old = std::path::PathBuf::from(old);
    let mut aside = Aside::default();
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(Error::io(format!("removing {}", old.display())))?;
        aside.dropped = Some(old.clone());
    }
    match std::fs::rename(pgdata, &old) {
        Ok(()) => {
            aside.kept = Some(old);
            Ok(aside)
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EXDEV)) => {
            tracing::warn!(error = %e, "PGDATA cannot be moved aside: it will be cleared");
            Ok(aside)
        }
        Err(e) => Err(Error::Io {
            what: format!("moving {} aside to {}", pgdata.display(), old.display()),
            source: e,
        }),
    }
}

/// `tcp_user_timeout` of a standby's connection to its upstream: as long as
/// `wal_receiver_timeout`, the operator's default.
const STANDBY_TCP_USER_TIMEOUT_MS: &str = "5000";

/// `standby.signal` plus the manager's keys in `postgresql.auto.conf`, pointing at `upstream`.
pub fn write_standby_config(ctx: &Context, upstream: &Upstream) -> Result<(), Error> {
    let pgdata = ctx.pgdata();
    write_passfile(ctx)?;
    let mut extra = vec![("user", REPLICATION_USER), ("application_name", ctx.me())];
    let certificate = replication_certificate(ctx);
    extra.extend(certificate.as_ref().map_or(Vec::new(), presenting));
    if let Some(ip) = &upstream.address {
        // `host` still names the pod: the passfile and TLS go by it, the connect by the IP.
        extra.push(("hostaddr", ip));
    }
    // The WAL receiver ignores connect_timeout; this bounds a connect to an address that no
    // longer answers (and a dead stream) in the kernel instead of its ~2 min of SYN retries.
    extra.push(("tcp_user_timeout", STANDBY_TCP_USER_TIMEOUT_MS));
    let conninfo = peer_conninfo(ctx, &upstream.name, &extra);
    let settings = [
        ("primary_conninfo", conninfo),
        ("primary_slot_name", slot_name(ctx.me())),
        ("recovery_target_timeline", "latest".to_string()),
    ];
    auto_conf::set(pgdata, &MANAGED_KEYS, &settings)?;
    write_private(&pgdata.join("standby.signal"), b"")
}

/// The replication role's client certificate and key, mounted beside the CA when Tusk issued
/// the cluster's certificates (the primary's `pg_hba.conf` then requires them; certificates the
/// user brings come without one).
pub fn replication_certificate(ctx: &Context) -> Option<(String, String)> {
    let dir = ctx.args.ca_file.parent()?;
    let (cert, key) = (dir.join("replication.crt"), dir.join("replication.key"));
    (cert.is_file() && key.is_file()).then(|| {
        let path = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
        (path(cert), path(key))
    })
}

/// The conninfo keys presenting `certificate` (cert, key).
pub fn presenting((cert, key): &(String, String)) -> Vec<(&'static str, &str)> {
    vec![("sslcert", cert), ("sslkey", key)]
}

/// The conninfo of member `peer`'s server: its address, `extra`, TLS verified against the
/// cluster's CA and by name, channel binding required (so a server that asks for a password
/// in clear, or a man in the middle, gets nothing), and the passfile (never a password).
pub fn peer_conninfo(ctx: &Context, peer: &str, extra: &[(&str, &str)]) -> String {
    let (host, port) = ctx.peers.address(peer);
    let (port, passfile) = (port.to_string(), ctx.passfile());
    let (passfile, ca_file) = (
        passfile.to_string_lossy(),
        ctx.args.ca_file.to_string_lossy(),
    );
    let mut pairs = vec![("host", host.as_str()), ("port", port.as_str())];
    pairs.extend_from_slice(extra);
    pairs.extend([
        ("sslmode", "verify-full"),
        ("sslrootcert", &ca_file),
        ("channel_binding", "require"),
        ("passfile", &passfile),
    ]);
    conninfo(&pairs)
}

/// A libpq conninfo string, every value single-quoted with `\` and `'` escaped.
pub fn conninfo(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The passfile (0600) for `tusk_replication` (streaming, cloning) and `tusk_rewind` (the rewind
/// source), one password, written atomically. The superuser's password is never in it: no peer
/// connection is the superuser's.
pub fn write_passfile(ctx: &Context) -> Result<(), Error> {
    let password = passfile_escape(&ctx.args.replication_password);
    let content = format!("*:*:*:{REPLICATION_USER}:{password}\n*:*:*:{REWIND_USER}:{password}\n");
    let path = ctx.passfile();
    let tmp = path.with_extension("tmp");
    write_private(&tmp, content.as_bytes())?;
    std::fs::rename(&tmp, &path).map_err(Error::io("installing the passfile"))
}

fn passfile_escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace(':', "\\:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_restore_marks_pgdata_unfinished_from_beside_it() {
        let home = tempfile::tempdir().unwrap();
        let pgdata = home.path().join("data");
        std::fs::create_dir(&pgdata).unwrap();
        std::fs::write(pgdata.join("PG_VERSION"), "17").unwrap();
        assert!(initialized(&pgdata));
        let marker = restore_marker(&pgdata);
        assert_eq!(marker, home.path().join("data.tusk-restore-pending"));
        std::fs::write(&marker, "base1").unwrap();
        assert!(
            !initialized(&pgdata),
            "a half-done restore is never started as it is"
        );
    }

    #[test]
    fn conninfo_quotes_every_value() {
        assert_eq!(
            conninfo(&[
                ("host", "demo-0.demo-hl.ns.svc"),
                ("passfile", r"/tmp/it's\x")
            ]),
            r"host='demo-0.demo-hl.ns.svc' passfile='/tmp/it\'s\\x'"
        );
    }

    #[test]
    fn passfile_fields_escape_colons_and_backslashes() {
        assert_eq!(passfile_escape(r"a:b\c"), r"a\:b\\c");
    }
}
