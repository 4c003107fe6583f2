use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "tusk-instance", version, about = "Tusk's instance manager")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Copy this executable to DEST (the init container's job), and each --with file beside it.
    Install {
        dest: PathBuf,
        #[arg(long)]
        with: Vec<PathBuf>,
    },
    /// Run as PID 1 of the postgres container.
    Run(Box<tusk_instance::config::RunArgs>),
    /// PostgreSQL's archive_command: hands FILE (`%p`) to the manager's archiver and succeeds
    /// once it is durable in the bucket.
    WalPush {
        file: PathBuf,
        #[arg(long, env = "TUSK_SOCKET_DIR", default_value = "/var/run/postgresql")]
        socket_dir: PathBuf,
    },
    /// PostgreSQL's restore_command during a restore: asks the manager for NAME (`%f`) into
    /// PATH (`%p`). Exits 1 when the archive has no such file, 126 on any other failure.
    WalFetch {
        name: String,
        path: PathBuf,
        #[arg(long, env = "TUSK_SOCKET_DIR", default_value = "/var/run/postgresql")]
        socket_dir: PathBuf,
    },
    /// Copy this image's PostgreSQL installation under DEST, mirrored at its own paths, with
    /// the libraries it links in DEST/deps (the old image's init container of an in-place
    /// upgrade).
    OldInstallation {
        dest: PathBuf,
        /// The installation's programs; `pg_config` on PATH names them otherwise.
        #[arg(long)]
        bin_dir: Option<PathBuf>,
    },
    /// Upgrade the stopped PGDATA in place (`pg_upgrade --link`) from the installation OLD holds
    /// to this image's; with --check, only `pg_upgrade --check`, changing nothing.
    UpgradeInPlace {
        #[arg(long)]
        old: PathBuf,
        #[arg(long, env = "PGDATA", default_value = "/var/lib/postgresql/data")]
        pgdata: PathBuf,
        /// This image's programs; `pg_config` on PATH names them otherwise.
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        #[arg(long)]
        check: bool,
        /// Where to write the outcome as JSON (the new system's identifier, or the error):
        /// the Job's termination message, which the operator reads.
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// Run as PID 1 of a pooler pod: PgBouncer routed to the primary the Lease names.
    Pooler(Box<tusk_instance::pooler::PoolerArgs>),
    /// Started by `run` itself: stops the primary's postmaster if `run` stalls (watchdog.rs).
    #[command(hide = true)]
    Watchdog,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    bounded_heap();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        // Colours only for a person at a terminal, not in container logs.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let command = Cli::parse().command;
    if let Command::WalPush { file, socket_dir } = &command {
        // PostgreSQL logs what an archive_command writes on stderr.
        return match tusk_instance::wal_push::push(
            file,
            socket_dir,
            tusk_instance::wal_push::TIMEOUT,
        ) {
            Ok(_) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("tusk-instance wal-push {}: {e}", file.display());
                std::process::ExitCode::FAILURE
            }
        };
    }
    if let Command::WalFetch {
        name,
        path,
        socket_dir,
    } = &command
    {
        use tusk_instance::restore_fetch::{self, Fetched};
        return match restore_fetch::request(name, path, socket_dir) {
            Ok(Fetched::Restored) => std::process::ExitCode::SUCCESS,
            Ok(Fetched::NotArchived) => std::process::ExitCode::from(restore_fetch::NOT_ARCHIVED),
            Err(e) => {
                eprintln!("tusk-instance wal-fetch {name}: {e}");
                std::process::ExitCode::from(restore_fetch::RECOVERY_MUST_STOP)
            }
        };
    }
    let result = match command {
        Command::Install { dest, with } => tusk_instance::install::install(&dest, &with),
        Command::Run(args) => tusk_instance::supervisor::run(*args).await,
        Command::Watchdog => tusk_instance::watchdog::watch(),
        Command::Pooler(args) => tusk_instance::pooler::run(*args).await,
        Command::OldInstallation { dest, bin_dir } => {
            tusk_instance::in_place::installation::Installation::here(bin_dir.as_deref())
                .and_then(|installation| installation.copy_to(&dest))
        }
        Command::UpgradeInPlace {
            old,
            pgdata,
            bin_dir,
            check,
            report,
        } => {
            let request = tusk_instance::in_place::run::Request {
                old_root: &old,
                new_bin: bin_dir.as_deref(),
                pgdata: &pgdata,
                check_only: check,
            };
            // One program on the data directory at a time: a manager that is still stopping
            // (or one started too early) waits, and never sees a half-linked directory.
            let outcome = match tusk_instance::data_lock::DataLock::acquire(&pgdata).await {
                Ok(lock) => {
                    let outcome = tusk_instance::in_place::run::upgrade(&request);
                    drop(lock);
                    outcome
                }
                Err(e) => Err(e),
            };
            if let Some(path) = &report {
                tusk_instance::in_place::run::report(path, &pgdata, &outcome);
            }
            outcome.map(|outcome| tracing::info!(?outcome, "upgrade in place"))
        }
        Command::WalPush { .. } | Command::WalFetch { .. } => Ok(()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "tusk-instance failed");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The archiver holds a few compressed segments at once, on several runtime threads. glibc's
/// defaults keep freed buffers in per-thread arenas and raise the mmap threshold after each
/// large free, so the resident set grew with every arena (92 MiB for four uploads, 45 for
/// one). Large buffers are mapped and given back at once, and two arenas serve every thread.
fn bounded_heap() {
    // SAFETY: mallopt only adjusts allocator parameters; no memory is touched.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
