//! `tusk`: the operator binary. `tusk run` starts the controller; `tusk crd` prints or writes
//! the CRDs generated from the Rust types.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use futures::future::join_all;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use tusk::leader::Leadership;
use tusk::metrics::Metrics;
use tusk::operator::{Scope, Settings, run};
use tusk::resources::AgentSettings;
use tusk::resources::ca_rotation::Lifetimes;
use tusk::telemetry::{self, LogFormat};

#[derive(Parser)]
#[command(name = "tusk", version, about = "A PostgreSQL operator for Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator.
    Run(RunArgs),
    /// Print the CRDs as YAML, or write one file per CRD into a directory.
    Crd {
        /// Directory to write `<plural>.<group>.yaml` files into; stdout when unset.
        #[arg(long)]
        output_dir: Option<PathBuf>,
        /// Also write the API reference, one Markdown page per CRD, into this directory
        /// (`docs/src/reference`).
        #[arg(long)]
        reference_dir: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Namespaces to watch (repeat or comma-separate); all namespaces when unset.
    #[arg(long = "namespace", env = "TUSK_NAMESPACES", value_delimiter = ',')]
    namespaces: Vec<String>,
    /// Image of the backup agent run by backup and restore Jobs.
    #[arg(long, env = "TUSK_AGENT_IMAGE", default_value = concat!("ghcr.io/tusk-operator/backup-agent:", env!("CARGO_PKG_VERSION")))]
    agent_image: String,
    /// Log format.
    #[arg(long, env = "TUSK_LOG_FORMAT", value_enum, default_value = "json")]
    log_format: LogFormat,
    /// Address of the /metrics, /healthz and /readyz endpoints.
    #[arg(long, env = "TUSK_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// Elect a leader through a Lease, so that several replicas are safe.
    #[arg(long, env = "TUSK_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// Namespace of the leader-election Lease (the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "tusk-system")]
    lease_namespace: String,
    /// Identity in the Lease; the pod name in a cluster.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Deadline of each call the operator makes to a backup bucket (e.g. 30s, 2m): a stalled
    /// endpoint fails the call instead of holding a reconcile.
    #[arg(long, env = "TUSK_BUCKET_TIMEOUT", default_value = "30s", value_parser = parse_timeout)]
    bucket_timeout: std::time::Duration,
    /// How many clusters are reconciled at once, in each watched namespace (or once for all
    /// namespaces when none is named). A reconcile mostly waits on the API server, so more at
    /// once helps only while the API server keeps up (at 1,000 new clusters it did not: README,
    /// Performance).
    #[arg(long, env = "TUSK_CONCURRENCY", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,
    /// For tests only: the lifetimes of the leaves and the CA Tusk issues, `LEAF,CA` (e.g.
    /// `3m,20m`), to see renewals and a CA rotation within a test run. Default: two and ten years.
    #[arg(long, env = "TUSK_CERTIFICATE_LIFETIMES", hide = true, value_parser = parse_lifetimes)]
    certificate_lifetimes: Option<Lifetimes>,
}

fn parse_lifetimes(value: &str) -> Result<Lifetimes, String> {
    let (leaf, ca) = value
        .split_once(',')
        .ok_or_else(|| format!("{value:?} is not LEAF,CA"))?;
    let duration = |text: &str| -> Result<time::Duration, String> {
        let parsed = parse_timeout(text.trim())?;
        time::Duration::try_from(parsed).map_err(|e| e.to_string())
    };
    Lifetimes::new(duration(leaf)?, duration(ca)?)
}

fn parse_timeout(value: &str) -> Result<std::time::Duration, String> {
    backup_store::duration::parse_duration(value).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Crd {
            output_dir,
            reference_dir,
        } => {
            let written = write_crds(output_dir);
            match reference_dir {
                Some(dir) if written == ExitCode::SUCCESS => write_reference(&dir),
                _ => written,
            }
        }
        Command::Run(args) => run_operator(args).await,
    }
}

fn write_crds(output_dir: Option<PathBuf>) -> ExitCode {
    for (file, crd) in tusk::crdgen::all() {
        let yaml = match tusk::crdgen::to_yaml(&crd) {
            Ok(yaml) => yaml,
            Err(e) => {
                eprintln!("rendering {file} failed: {e}");
                return ExitCode::FAILURE;
            }
        };
        match &output_dir {
            None => print!("---\n{yaml}"),
            Some(dir) => {
                let header =
                    "# Generated by `tusk crd --output-dir crds` from src/crd; do not edit.\n";
                if let Err(e) = std::fs::write(dir.join(file), format!("{header}{yaml}")) {
                    eprintln!("writing {} failed: {e}", dir.join(file).display());
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    ExitCode::SUCCESS
}

/// One page per CRD; refuses to write a reference with a field it cannot describe.
fn write_reference(dir: &std::path::Path) -> ExitCode {
    for (file, crd) in tusk::crdgen::all() {
        let page = match tusk::crdgen::reference::render(&crd) {
            Ok(page) => page,
            Err(e) => {
                eprintln!("rendering the reference of {file} failed: {e}");
                return ExitCode::FAILURE;
            }
        };
        if !page.undescribed.is_empty() {
            eprintln!(
                "{file}: fields without a description (add a doc comment): {:?}",
                page.undescribed
            );
            return ExitCode::FAILURE;
        }
        let path = dir.join(&page.file);
        if let Err(e) = std::fs::write(&path, page.markdown) {
            eprintln!("writing {} failed: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

async fn run_operator(args: RunArgs) -> ExitCode {
    telemetry::init(args.log_format);
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(e) => {
            error!(error = %e, "no Kubernetes configuration found");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    let metrics = Arc::new(Metrics::default());
    tokio::spawn(tusk::memory::trim_periodically());
    let server = tokio::spawn(tusk::server::serve(
        args.listen,
        client.clone(),
        metrics.clone(),
        shutdown.clone().cancelled_owned(),
    ));

    let leadership = if args.leader_election {
        let identity = args
            .identity
            .clone()
            .unwrap_or_else(|| format!("tusk-{}", std::process::id()));
        info!(lease = tusk::leader::LEASE_NAME, namespace = %args.lease_namespace, %identity, "waiting for leadership");
        let acquired = tokio::select! {
            acquired = Leadership::acquire(client.clone(), &args.lease_namespace, &identity) => acquired,
            () = shutdown.cancelled() => return ExitCode::SUCCESS,
        };
        match acquired {
            Ok(leadership) => Some(leadership),
            Err(e) => {
                error!(error = %e, "leader election failed");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    info!("leading; starting controllers");

    let scopes = if args.namespaces.is_empty() {
        vec![Scope::AllNamespaces]
    } else {
        args.namespaces.into_iter().map(Scope::Namespace).collect()
    };
    let settings = Settings {
        agent: AgentSettings {
            image: args.agent_image,
        },
        bucket_timeout: args.bucket_timeout,
        certificate_lifetimes: args.certificate_lifetimes.unwrap_or_default(),
        concurrency: args.concurrency,
    };
    let controllers = join_all(scopes.into_iter().map(|scope| {
        run(
            client.clone(),
            scope,
            settings.clone(),
            metrics.clone(),
            shutdown.clone().cancelled_owned(),
        )
    }));
    let code = match leadership {
        Some(mut leadership) => {
            let code = tokio::select! {
                _ = controllers => ExitCode::SUCCESS,
                () = leadership.lost() => {
                    // Exiting is the safe way to stop every in-flight reconcile at once; the
                    // Deployment restarts the pod, which then waits for the Lease again.
                    error!("lost the leader Lease; exiting");
                    ExitCode::FAILURE
                }
            };
            leadership.release().await;
            code
        }
        None => {
            controllers.await;
            ExitCode::SUCCESS
        }
    };
    shutdown.cancel();
    if let Ok(Err(e)) = server.await {
        error!(error = %e, "the HTTP server failed");
    }
    code
}

async fn cancel_on_signal(token: CancellationToken) {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    info!("shutdown requested; finishing in-flight reconciles");
    token.cancel();
}
