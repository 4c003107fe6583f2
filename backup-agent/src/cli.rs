//! Command-line interface: every flag has an environment variable, so a Kubernetes Job can
//! configure the agent entirely through env and secretKeyRefs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use backup_agent::compression::Compression;
use backup_agent::pg::SslMode;
use backup_store::lsn::Lsn;
use backup_store::settings::StoreFlags;

pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  other failure (dump/restore tool failed, I/O error, interrupted)
  2  invalid arguments (including a backup id that exists or another writer claimed)
  3  database unreachable, authentication failed or database missing
  4  object store error (credentials, missing bucket, backup not found)
  5  integrity failure (size or sha256 mismatch, unreadable manifest)
  6  restore target database is not empty (use --force)
  7  verify-restore: the backup failed a check (the report names it)
  8  base-backup: the archive never received the WAL the backup needs (no manifest written)
  wal-fetch: 1 the archive has no such file, 126 any other failure (recovery must stop)

Credentials: PGPASSWORD for PostgreSQL (never a flag); the AWS default chain for S3
(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, web identity/IRSA, instance metadata);
GOOGLE_APPLICATION_CREDENTIALS (service-account key JSON) or Workload Identity for GCS.";

#[derive(Debug, Parser)]
#[command(
    name = "backup-agent",
    version,
    about = "Streams PostgreSQL logical backups to S3/MinIO or GCS and restores them",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, env = "TUSK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Dump globals and databases into <path>/<namespace>/<cluster>/<backupId>/.
    #[command(after_help = EXIT_CODES)]
    Backup(BackupArgs),
    /// Restore a backup (verified before anything is applied).
    #[command(after_help = EXIT_CODES)]
    Restore(RestoreArgs),
    /// List complete backups (those with a manifest), oldest first.
    #[command(after_help = EXIT_CODES)]
    List(ListArgs),
    /// Download a backup and check every file's size and sha256.
    #[command(after_help = EXIT_CODES)]
    Verify(VerifyArgs),
    /// Restore a backup into a throwaway PostgreSQL and check it: checksums, restore, every
    /// database present, pg_amcheck, row counts. Prints and leaves a JSON report.
    #[command(name = "verify-restore", after_help = VERIFY_RESTORE_HELP)]
    VerifyRestore(VerifyRestoreArgs),
    /// Delete one backup (exactly its own prefix).
    #[command(after_help = EXIT_CODES)]
    Delete(DeleteArgs),
    /// Apply retention to one owner's backups: delete those beyond --keep or older than
    /// --max-age.
    #[command(after_help = EXIT_CODES)]
    Prune(PruneArgs),
    /// PostgreSQL's archive_command: archive one WAL file (`%p`), compressed, under the
    /// database system's identifier; the same bytes again succeed, different bytes are refused.
    #[command(name = "wal-push", after_help = EXIT_CODES)]
    WalPush(WalPushArgs),
    /// PostgreSQL's restore_command: fetch one archived WAL file (`%f`) into `%p`. Exits 1 only
    /// when the archive has no such file; any other failure exits 126, which stops recovery
    /// instead of ending it early at the wrong point.
    #[command(name = "wal-fetch", after_help = EXIT_CODES)]
    WalFetch(WalFetchArgs),
    /// A physical base backup of the whole server (pg_basebackup, without WAL: the archive
    /// holds it) into <path>/<namespace>/<cluster>/<backupId>/base.tar.zst, manifest last.
    #[command(name = "base-backup", after_help = EXIT_CODES)]
    BaseBackup(BaseBackupArgs),
    /// Unpack a base backup into a new data directory and check it with pg_verifybackup;
    /// recovery from the archive (restore_command: wal-fetch) is then PostgreSQL's.
    #[command(name = "base-restore", after_help = EXIT_CODES)]
    BaseRestore(BaseRestoreArgs),
    /// On the primary: a named restore point with every table's exact row count there, stored
    /// beside the WAL archive (`wal/<system>/points/`) for the verification of physical
    /// backups, which recovers to it and compares.
    #[command(name = "restore-point", after_help = EXIT_CODES)]
    RestorePoint(RestorePointArgs),
}

#[derive(Debug, Args)]
pub struct RestorePointArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

#[derive(Debug, Args)]
pub struct BaseBackupArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub pg: PgArgs,
    #[command(flatten)]
    pub write: WriteArgs,
    /// How long to wait for the archive to hold the WAL from the backup's start to its stop
    /// before giving up: the manifest is written only once it does.
    #[arg(long, env = "TUSK_WAL_WAIT_SECONDS", default_value_t = 600)]
    pub wal_wait_seconds: u64,
}

#[derive(Debug, Args)]
pub struct BaseRestoreArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Backup id, or `latest`.
    #[arg(long, env = "TUSK_BACKUP_ID", default_value = "latest")]
    pub backup_id: String,
    /// The new data directory: absent or empty.
    #[arg(long, env = "PGDATA")]
    pub pgdata: PathBuf,
    /// Only a backup completed at or before this time (RFC 3339, or PostgreSQL's
    /// `2026-11-28 10:00:00+00`): with `latest`, the newest such one. For a restore to a time.
    #[arg(long, value_parser = parse_time)]
    pub before: Option<jiff::Timestamp>,
    /// Only a backup consistent (its stop LSN) at or before this WAL position `X/Y`: with
    /// `latest`, the newest such one. For a restore to an LSN.
    #[arg(long, value_parser = parse_lsn, conflicts_with = "before")]
    pub before_lsn: Option<Lsn>,
    /// Directory holding pg_verifybackup [default: PATH].
    #[arg(long, env = "TUSK_PG_BIN_DIR")]
    pub pg_bin_dir: Option<PathBuf>,
}

/// The bucket, and the cluster whose place in it a command uses.
#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(flatten)]
    pub flags: StoreFlags,
    /// Kubernetes namespace of the cluster (a path segment of the layout).
    #[arg(long, env = "TUSK_NAMESPACE")]
    pub namespace: String,
    /// Cluster name (a path segment of the layout).
    #[arg(long, env = "TUSK_CLUSTER")]
    pub cluster: String,
}

#[derive(Debug, Args)]
pub struct PgArgs {
    /// PostgreSQL host (or Unix socket directory).
    #[arg(long, env = "PGHOST", default_value = "localhost")]
    pub host: String,
    /// PostgreSQL port.
    #[arg(long, env = "PGPORT", default_value_t = 5432)]
    pub port: u16,
    /// Numeric address to dial; the host still names the server for TLS.
    #[arg(long, env = "PGHOSTADDR")]
    pub hostaddr: Option<std::net::IpAddr>,
    /// TLS, as libpq names it. Every mode that speaks TLS verifies the server against
    /// PGSSLROOTCERT and by name, with channel binding required.
    #[arg(long, env = "PGSSLMODE", value_enum, default_value_t = SslMode::Prefer)]
    pub ssl_mode: SslMode,
    /// The CA (PEM) the server's certificate must chain to.
    #[arg(long, env = "PGSSLROOTCERT")]
    pub ssl_root_cert: Option<PathBuf>,
    /// A client certificate (PEM) presented to a server that asks for one, with PGSSLKEY.
    #[arg(long, env = "PGSSLCERT")]
    pub ssl_cert: Option<PathBuf>,
    /// The key of PGSSLCERT (PEM).
    #[arg(long, env = "PGSSLKEY")]
    pub ssl_key: Option<PathBuf>,
    /// PostgreSQL role. A backup reads every database and the roles (Tusk's `tusk_backup`:
    /// pg_read_all_data, BYPASSRLS); a restore creates roles and databases (the superuser).
    #[arg(long, env = "PGUSER", default_value = "postgres")]
    pub username: String,
    /// Database for catalog queries and pg_dumpall.
    #[arg(long, env = "PGDATABASE", default_value = "postgres")]
    pub maintenance_database: String,
    /// Directory holding pg_dump, pg_dumpall, pg_restore and psql [default: PATH].
    #[arg(long, env = "TUSK_PG_BIN_DIR")]
    pub pg_bin_dir: Option<PathBuf>,
    /// How long to retry while the database is unreachable or starting up (e.g. 60s, 5m).
    #[arg(long, env = "TUSK_CONNECT_TIMEOUT", default_value = "60s")]
    pub connect_timeout: String,
}

/// What every command that writes a backup takes: its id, compression and identities.
#[derive(Debug, Args)]
pub struct WriteArgs {
    /// Backup id [default: UTC start time, e.g. 20261122T020000Z].
    #[arg(long, env = "TUSK_BACKUP_ID")]
    pub backup_id: Option<String>,
    /// Compression of the stored files.
    #[arg(long, env = "TUSK_COMPRESSION", value_enum, default_value_t = Compression::Zstd)]
    pub compression: Compression,
    /// Identity of the owning cluster (the operator passes the PostgreSQL's metadata.uid),
    /// recorded in the backup's claim and manifest; retention and deletion go by it.
    #[arg(long, env = "TUSK_CLUSTER_UID")]
    pub cluster_uid: Option<String>,
    /// Identity of this run, the same for every retry of it (the operator passes the Job's
    /// uid): a retried run takes over its own claim of the backup id; any other writer of
    /// the id fails.
    #[arg(long, env = "TUSK_WRITER_ID")]
    pub writer_id: Option<String>,
}

impl WriteArgs {
    pub fn backup_id(&self) -> String {
        self.backup_id
            .clone()
            .unwrap_or_else(|| backup_store::layout::default_backup_id(jiff::Timestamp::now()))
    }

    /// Empty values come from unset downward-API fields: no identity.
    pub fn cluster_uid(&self) -> Option<String> {
        self.cluster_uid.clone().filter(|v| !v.is_empty())
    }

    pub fn writer(&self) -> Option<String> {
        self.writer_id.clone().filter(|v| !v.is_empty())
    }
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub pg: PgArgs,
    #[command(flatten)]
    pub write: WriteArgs,
    /// Database to dump (repeatable; env: comma-separated) [default: all non-template].
    #[arg(long = "database", env = "TUSK_DATABASES", value_delimiter = ',')]
    pub databases: Vec<String>,
    /// How long pg_dump waits for a table lock before it fails, instead of waiting forever
    /// behind a long-running ALTER or LOCK (e.g. 30s, 10m).
    #[arg(long, env = "TUSK_LOCK_WAIT_TIMEOUT", default_value = "10m")]
    pub lock_wait_timeout: String,
    /// Record every table's exact row count, counted in the dump's own snapshot, in the
    /// manifest (what `verify-restore` compares against). Costs one more read of every table.
    #[arg(long, env = "TUSK_RECORD_COUNTS", num_args = 0..=1, default_value = "true",
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub record_counts: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub pg: PgArgs,
    /// Backup id or "latest".
    #[arg(long, env = "TUSK_BACKUP_ID", default_value = "latest")]
    pub backup_id: String,
    /// Restore over databases that already contain objects (drops what the dump recreates).
    #[arg(long, env = "TUSK_FORCE")]
    pub force: bool,
    /// Directory for verified downloads before they are applied [default: system temp dir].
    #[arg(long, env = "TUSK_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// Role that keeps its target attributes and password if it already exists there, e.g. the
    /// operator-managed app owner (repeatable; env: comma-separated). The connecting user always does.
    #[arg(
        long = "preserve-role",
        env = "TUSK_PRESERVE_ROLES",
        value_delimiter = ','
    )]
    pub preserve_roles: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Backup id or "latest".
    #[arg(long, env = "TUSK_BACKUP_ID", default_value = "latest")]
    pub backup_id: String,
}

pub const VERIFY_RESTORE_HELP: &str = "\
Runs as a non-root user with the PostgreSQL server binaries (initdb, postgres, pg_ctl,
pg_restore, psql, pg_amcheck) of the backup's major version or newer, e.g. inside the
postgres:<major> image as its postgres user. The throwaway cluster lives in a new directory
under --scratch-dir (needs room for the compressed backup plus the restored database),
listens only on a Unix socket there (no TCP), and is stopped and removed at the end, also on
SIGTERM/SIGINT.

Checks, in order: checksums (every file present, size and sha256 as in the manifest),
restore (globals and every database restored without errors, by the same code as `restore`),
databases (every database of the manifest exists), amcheck (pg_amcheck --heapallindexed, heap
and B-tree, every database), counts (user tables and exact row counts equal those recorded at
backup time; `skipped` with \"not recorded\" for backups without counts).

A physical backup (named by id) is restored with base-restore, its archive walked from its
start, and a throwaway server recovered to the newest restore point the primary wrote after it
(restore-point), else to the end of the archive: checksums, restore, wal, databases, amcheck,
counts (those recorded at the point).

Report: one JSON object on stdout (the summary line's `details`) and, when TUSK_TERMINATION_LOG
is set, alone in that file (at most 4096 bytes, messages shortened to fit):
  {\"backupId\", \"phase\": \"Passed\"|\"Failed\"|\"Error\", \"failedCheck\" (when Failed),
   \"checks\": [{\"name\", \"result\": \"passed\"|\"failed\"|\"skipped\", \"message\"}],
   \"databases\", \"tables\", \"rows\", \"startedAt\", \"completedAt\", \"durationSeconds\", \"message\"}

Exit codes:
  0  Passed: every check passed or was skipped (see its message)
  7  Failed: the backup is bad; failedCheck names the first failed check
  other  Error: the verification could not run; the report says why, nothing is known
         about the backup:
  1  other failure (I/O, interrupted by a signal, the scratch server failed)
  2  invalid arguments, run as root, or a pg_restore older than the backup's pg_dump
  3  the scratch server refused a connection
  4  object store error (credentials, missing bucket, backup not found)";

#[derive(Debug, Args)]
pub struct VerifyRestoreArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Backup id or "latest".
    #[arg(long, env = "TUSK_BACKUP_ID", default_value = "latest")]
    pub backup_id: String,
    /// Directory under which the throwaway cluster's data directory, socket and the verified
    /// downloads are created (and removed) [default: system temp dir].
    #[arg(long, env = "TUSK_SCRATCH_DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// Directory holding initdb, postgres, pg_ctl, pg_restore, psql and pg_amcheck [default: PATH].
    #[arg(long, env = "TUSK_PG_BIN_DIR")]
    pub pg_bin_dir: Option<PathBuf>,
    /// How long the throwaway server may take to start (e.g. 60s, 2m).
    #[arg(long, env = "TUSK_STARTUP_TIMEOUT", default_value = "2m")]
    pub startup_timeout: String,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The backup to delete.
    #[arg(long, env = "TUSK_BACKUP_ID")]
    pub backup_id: String,
}

#[derive(Debug, Args)]
pub struct WalPushArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The data directory, whose control file names the database system [default: the
    /// working directory, where PostgreSQL runs archive_command].
    #[arg(long, env = "PGDATA", default_value = ".")]
    pub pgdata: PathBuf,
    /// The file to archive (`%p`).
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct WalFetchArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The data directory being recovered (its control file names the system).
    #[arg(long, env = "PGDATA", default_value = ".")]
    pub pgdata: PathBuf,
    /// The file wanted (`%f`).
    pub name: String,
    /// Where to write it (`%p`).
    pub destination: PathBuf,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Keep at most this many newest complete backups.
    #[arg(long, env = "TUSK_KEEP")]
    pub keep: Option<usize>,
    /// Delete complete backups older than this (e.g. 30d, 12h). The newest is always kept.
    #[arg(long, env = "TUSK_MAX_AGE")]
    pub max_age: Option<String>,
    /// Keep every point of this last stretch of time (e.g. 7d) restorable: base backups older
    /// than the newest one before it, and the WAL only they needed, are deleted.
    #[arg(long, env = "TUSK_RECOVERY_WINDOW")]
    pub recovery_window: Option<String>,
    /// The cluster whose backups are pruned (its metadata.uid). Backups recording another
    /// owner are never deleted; without this flag only backups recording no owner are.
    #[arg(long, env = "TUSK_CLUSTER_UID")]
    pub cluster_uid: Option<String>,
    /// A backup id never deleted, e.g. the one the cluster was restored from (repeatable).
    #[arg(long = "protect")]
    pub protect: Vec<String>,
}

/// A moment with its offset, as RFC 3339 or as PostgreSQL prints a `timestamptz`.
pub fn parse_time(text: &str) -> Result<jiff::Timestamp, String> {
    text.trim()
        .parse::<jiff::Timestamp>()
        .map_err(|e| format!("{text:?} is not a time with an offset: {e}"))
}

/// A WAL position `X/Y`.
pub fn parse_lsn(text: &str) -> Result<Lsn, String> {
    Lsn::parse(text.trim()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod time_tests {
    use super::parse_time;

    #[test]
    fn times_parse_as_rfc_3339_and_as_postgresql_prints_them() {
        let rfc = parse_time("2026-11-28T10:00:00Z").unwrap();
        assert_eq!(parse_time("2026-11-28 10:00:00+00").unwrap(), rfc);
        assert_eq!(parse_time("2026-11-28 11:00:00.000000+01").unwrap(), rfc);
        assert!(
            parse_time("2026-11-28 10:00:00").is_err(),
            "no offset, no guess"
        );
    }
}
