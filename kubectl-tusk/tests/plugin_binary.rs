//! The built plugin as kubectl runs it (`kubectl tusk ...` execs `kubectl-tusk`): its usage
//! names every command, and without a reachable cluster it says so and exits 1 instead of
//! panicking. The end-to-end scenarios run this same executable against real clusters.

use std::process::{Command, Output};

fn plugin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-tusk"))
        .args(args)
        // No cluster: a kubeconfig that does not exist, and not in a pod.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("running kubectl-tusk")
}

#[test]
fn usage_names_every_command() {
    let out = plugin(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    let usage = String::from_utf8_lossy(&out.stdout);
    for command in [
        "status",
        "backup",
        "restore",
        "promote",
        "psql",
        "certificate",
        "report",
    ] {
        assert!(
            usage.lines().any(|l| l.trim_start().starts_with(command)),
            "`{command}` missing from the usage:\n{usage}"
        );
    }
}

#[test]
fn without_a_cluster_it_says_so_and_exits_1() {
    let out = plugin(&["status", "demo"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}

#[test]
fn a_malformed_flag_is_refused_before_any_request() {
    let out = plugin(&["backup", "demo", "--wait", "--timeout", "soon"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("--timeout"), "stderr: {stderr}");
}
