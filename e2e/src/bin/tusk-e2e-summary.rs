//! `tusk-e2e-summary LISTED SUMMARY`: the tally of an end-to-end run (`tusk_e2e::summary`).
//! LISTED is the scenarios' `--ignored --list` output for the scenarios the run was to run;
//! SUMMARY is the run's `E2E_SUMMARY`. Prints the counts; exits 1 when a scenario failed or
//! reported nothing, 2 when a file cannot be read.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listed, summary] = args.as_slice() else {
        eprintln!("usage: tusk-e2e-summary LISTED SUMMARY");
        return ExitCode::from(2);
    };
    let read = |path: &str| std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"));
    let (listed, summary) = match (read(listed), read(summary)) {
        (Ok(l), Ok(s)) => (l, s),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("tusk-e2e-summary: {e}");
            return ExitCode::from(2);
        }
    };
    let tally = tusk_e2e::summary::tally(&listed, &summary);
    print!("{}", tally.report());
    if tally.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
