//! `backup-agent`: the program Tusk's backup and restore Jobs run.

mod base_cmd;
mod cli;
mod pg_args;
mod run;
mod store_args;
mod summary;
mod verify_restore_cmd;
mod wal_cmd;

use std::process::ExitCode;

use backup_agent::termination;
use clap::Parser;

fn main() -> ExitCode {
    not_dumpable();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Usage errors end the pod too; they leave what is wrong (not the usage text).
            if e.use_stderr() {
                let rendered = e.to_string();
                let what: Vec<&str> = rendered
                    .lines()
                    .take_while(|l| !l.starts_with("Usage:"))
                    .collect();
                termination::record(&what.join("\n"));
            }
            e.exit()
        }
    };
    init_logging(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let message = format!("cannot start the async runtime: {e}");
            termination::record(&message);
            eprintln!("backup-agent: {message}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(run::run(cli.command));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn init_logging(format: cli::LogFormat) {
    use tracing_subscriber::EnvFilter;
    // The AWS SDK logs every request at info; keep its noise out unless asked for.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new("info,aws_config=warn,aws_smithy_runtime=warn,aws_sdk_s3=warn")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        cli::LogFormat::Json => builder.json().init(),
        cli::LogFormat::Text => builder.init(),
    }
}

/// The agent may hold a bucket's credentials in its environment (the instance manager runs it
/// for a restore, a restore point): made not dumpable, its `/proc/<pid>/environ` is root's, so
/// no database process of the same user reads them (issue 46, defect 8). First thing, before
/// anything reads them.
fn not_dumpable() {
    // SAFETY: PR_SET_DUMPABLE takes a plain integer and changes only this process's flag.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        eprintln!(
            "backup-agent: could not make the process not dumpable: {}",
            std::io::Error::last_os_error()
        );
    }
}
