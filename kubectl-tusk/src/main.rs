//! `kubectl tusk`: the kubectl plugin of the Tusk PostgreSQL operator. On PATH as
//! `kubectl-tusk`, kubectl runs it for `kubectl tusk …`.

mod backup;
mod certificate;
mod cluster;
#[cfg(test)]
mod docs_invocations;
mod error;
mod format;
mod promote;
mod psql;
mod report;
mod restore;
mod status;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use kube::Client;
use tusk::crd::BackupMethod;

use error::{Error, Result};

#[derive(Parser)]
#[command(
    name = "kubectl tusk",
    version,
    about = "Operate Tusk PostgreSQL clusters: status, backups, restores, switchovers, psql, support bundles"
)]
struct Cli {
    /// Namespace; the current context's namespace when unset.
    #[arg(short, long, global = true)]
    namespace: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One screen: phase, conditions, instances, endpoints, backups, schedule, warnings.
    Status {
        name: String,
        #[arg(short, long, value_enum, default_value = "text")]
        output: status::Output,
    },
    /// Create a Backup of cluster NAME; with --wait, follow it to Completed (exit 0) or
    /// Failed (exit 1); a timeout exits 2.
    Backup {
        name: String,
        /// Name of the Backup; `<cluster>-<UTC timestamp>` when unset.
        #[arg(long = "name", value_name = "BACKUP")]
        backup: Option<String>,
        /// A physical base backup (needs spec.backup.walArchive) instead of a logical dump.
        #[arg(long)]
        physical: bool,
        #[arg(long)]
        wait: bool,
        /// How long --wait waits, e.g. 90s, 10m, 1h.
        #[arg(long, default_value = "10m", value_parser = backup::parse_duration)]
        timeout: Duration,
    },
    /// Restore Backup BACKUP into a new cluster with its source cluster's spec.
    Restore {
        backup: String,
        /// Name of the new cluster.
        #[arg(long = "to", value_name = "NEW")]
        to: String,
        /// For a physical Backup: recover to this moment (RFC 3339, e.g. 2026-11-28T10:00:00Z)
        /// instead of the end of the archive.
        #[arg(long)]
        time: Option<k8s_openapi::jiff::Timestamp>,
        /// Print the PostgreSQL as YAML instead of applying it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Planned switchover: make INSTANCE (`NAME-N` or `N`) the primary. The old primary shuts
    /// down cleanly and INSTANCE is promoted once it has replayed all of its WAL; with --wait,
    /// follow it to the end (exit 0) or the operator's refusal (exit 1).
    Promote {
        name: String,
        instance: String,
        #[arg(long)]
        wait: bool,
        /// How long --wait waits, e.g. 90s, 10m.
        #[arg(long, default_value = "2m", value_parser = backup::parse_duration)]
        timeout: Duration,
    },
    /// psql in the primary (or a replica) on the application database, through kubectl exec.
    Psql {
        name: String,
        #[arg(long)]
        replica: bool,
        /// Act as the database owner (spec.bootstrap.owner) rather than the superuser.
        #[arg(long)]
        owner: bool,
        /// Arguments for psql, after `--`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// A client certificate for ROLE (one of yours, not Tusk's), signed by cluster NAME's CA,
    /// in a Secret of yours (`kubernetes.io/tls` with `ca.crt`). With a `spec.pgHba` rule such
    /// as `hostssl app ROLE all cert` the role logs in with it and no password. Run it again
    /// to renew, and after each CA rotation (`kubectl tusk status` shows the CA's next step).
    Certificate {
        name: String,
        #[arg(long = "role", value_name = "ROLE")]
        role: String,
        /// The Secret to write; `<cluster>-<role>-tls` when unset.
        #[arg(long)]
        secret: Option<String>,
        /// Days it is valid (never past the CA's own expiry).
        #[arg(long, default_value_t = 90)]
        days: u32,
    },
    /// Support bundle: every object of the cluster as YAML (Secret values redacted), Events,
    /// the status screen, instance and operator logs.
    Report {
        name: String,
        /// A directory, or a file ending in .tar.gz or .tgz.
        #[arg(short, long, value_name = "DIR|FILE")]
        output: Option<PathBuf>,
        #[arg(long, default_value = "tusk-system")]
        operator_namespace: String,
        #[arg(long, default_value = "app.kubernetes.io/name=tusk-operator")]
        operator_selector: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            match e {
                Error::BackupTimeout { .. } => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let client = Client::try_default().await.map_err(Error::Client)?;
    let ns = cli
        .namespace
        .unwrap_or_else(|| client.default_namespace().to_owned());
    match cli.command {
        Command::Status { name, output } => {
            print!("{}", status::run(&client, &ns, &name, output).await?);
        }
        Command::Backup {
            name,
            backup,
            physical,
            wait,
            timeout,
        } => {
            let method = if physical {
                BackupMethod::Physical
            } else {
                BackupMethod::Logical
            };
            let created = backup::create(&client, &ns, &name, backup, method).await?;
            println!("Backup {ns}/{created} created for PostgreSQL {name}");
            if wait {
                backup::follow(&client, &ns, &created, timeout, |line| println!("{line}")).await?;
            }
        }
        Command::Restore {
            backup,
            to,
            time,
            dry_run,
        } => {
            let yaml = restore::run(&client, &ns, &backup, &to, time, dry_run).await?;
            if dry_run {
                print!("{yaml}");
            } else {
                println!(
                    "PostgreSQL {ns}/{to} applied, restoring Backup {backup}; follow it with \
                     `kubectl tusk status {to} -n {ns}`"
                );
            }
        }
        Command::Promote {
            name,
            instance,
            wait,
            timeout,
        } => {
            let target = promote::request(&client, &ns, &name, &instance).await?;
            println!("switchover of PostgreSQL {ns}/{name} to {target} requested");
            if wait {
                promote::follow(&client, &ns, &name, &target, timeout).await?;
                println!("{target} is the primary of {name}");
            }
        }
        Command::Psql {
            name,
            replica,
            owner,
            args,
        } => {
            let target = if replica {
                psql::Target::Replica
            } else {
                psql::Target::Primary
            };
            let code = psql::run(&client, &ns, &name, target, owner, &args).await?;
            return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)));
        }
        Command::Certificate {
            name,
            role,
            secret,
            days,
        } => {
            let issued = certificate::run(&client, &ns, &name, &role, secret, days).await?;
            println!(
                "Secret {ns}/{} holds a client certificate for role {role} of PostgreSQL \
                 {name}, valid until {}; the cluster's CA takes its next rotation step at {}: \
                 issue it again after that step",
                issued.secret,
                certificate::rfc3339(issued.not_after),
                certificate::rfc3339(issued.next_ca_step),
            );
        }
        Command::Report {
            name,
            output,
            operator_namespace,
            operator_selector,
        } => {
            let output =
                output.unwrap_or_else(|| PathBuf::from(format!("tusk-report-{name}.tar.gz")));
            let operator = report::OperatorPods {
                namespace: operator_namespace,
                selector: operator_selector,
            };
            let files = report::run(&client, &ns, &name, &operator, &output).await?;
            println!("{}: {} files", output.display(), files.len());
            for file in files {
                println!("  {file}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
