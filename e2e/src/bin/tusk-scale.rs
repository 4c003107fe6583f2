//! `tusk-scale`: the scale benchmark against the local control plane and operator (Tusk or a
//! peer) that scripts/bench-scale.sh starts. Prints a Markdown table of what it measured.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tusk_e2e::platform::Local;
use tusk_e2e::scale::fleet::Fleet;
use tusk_e2e::scale::operators::Operator;
use tusk_e2e::scale::{Plan, Stand, run, stand_dir};
use tusk_e2e::settings::Settings;

#[derive(Parser)]
#[command(about = "Applies N clusters to the local control plane and measures the operator")]
struct Args {
    /// The operator under test (already running: e2e/local/operator.sh or peer.sh).
    #[arg(long, value_enum, default_value = "tusk")]
    operator: Operator,
    /// Clusters to apply at once.
    #[arg(long, default_value_t = 100)]
    clusters: usize,
    /// Namespaces to spread them over (round robin).
    #[arg(long, default_value_t = 1)]
    namespaces: usize,
    /// Seconds the operator is watched at rest.
    #[arg(long, default_value_t = 600)]
    rest_seconds: u64,
    /// Which build of the operator runs (printed with the figures): Tusk's profile, a peer's
    /// version.
    #[arg(long, default_value = "release")]
    build: String,
    /// Seconds any phase may take before the run fails.
    #[arg(long, default_value_t = 1800)]
    timeout_seconds: u64,
    /// Seconds to wait for every cluster to be ready in the operator's own terms before
    /// reporting how far they got (default: the timeout). A peer on kwok may never get there.
    #[arg(long)]
    ready_timeout_seconds: Option<u64>,
    /// Seconds to wait for every child to be gone after the delete before reporting what is
    /// left (default: the timeout). The garbage collector's pace, not the operator's.
    #[arg(long)]
    delete_timeout_seconds: Option<u64>,
    /// After the restart at rest: this many more clusters applied, and the operator restarted
    /// again while they are being created (0: not measured).
    #[arg(long, default_value_t = 0)]
    backlog: usize,
    /// Tusk's clusters with `-rw` as their only client Service (`spec.services.disabled: [ro,
    /// r]`).
    #[arg(long)]
    only_rw: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.only_rw && args.operator != Operator::Tusk {
        eprintln!("--only-rw sets Tusk's spec.services; the peers' clusters keep theirs");
        return ExitCode::from(2);
    }
    let plan = Plan {
        operator: args.operator,
        fleet: Fleet {
            clusters: args.clusters,
            namespaces: args.namespaces.max(1),
            first: 0,
            only_rw: args.only_rw,
        },
        backlog: args.backlog,
        rest: Duration::from_secs(args.rest_seconds),
        timeout: Duration::from_secs(args.timeout_seconds),
        ready_timeout: Duration::from_secs(
            args.ready_timeout_seconds.unwrap_or(args.timeout_seconds),
        ),
        delete_timeout: Duration::from_secs(
            args.delete_timeout_seconds.unwrap_or(args.timeout_seconds),
        ),
    };
    let result = async {
        let dir = stand_dir()?;
        let client = kube::Client::try_default().await?;
        let operator = Local::new(client.clone(), dir.clone(), &Settings::from_env());
        run(
            &Stand {
                client,
                operator,
                under_test: args.operator,
                dir,
            },
            &plan,
        )
        .await
    }
    .await;
    match result {
        Ok(report) => {
            let build = match args.only_rw {
                true => format!("{}; -rw its only client Service", args.build),
                false => args.build.clone(),
            };
            println!("{}", report.table(&build));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tusk-scale: {e}");
            ExitCode::FAILURE
        }
    }
}
