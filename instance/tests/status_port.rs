//! The status port (8000) as a client meets it: TLS only, the server's certificate verified
//! by name against the cluster's CA, `/status` and `/metrics` only with the status token,
//! `/healthz` and `/readyz` open for the kubelet, a renewed certificate served without a
//! restart.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

/// `curl` against the manager: the HTTP code (0 when no HTTP answer came) and the body.
fn curl(url: &str, ca: Option<&Path>, token: Option<&str>) -> (u16, String) {
    curl_as("GET", url, ca, token)
}

fn curl_as(method: &str, url: &str, ca: Option<&Path>, token: Option<&str>) -> (u16, String) {
    let mut curl = Command::new("curl");
    curl.args([
        "-s",
        "--max-time",
        "5",
        "-X",
        method,
        "-w",
        "\n%{http_code}",
    ]);
    match ca {
        Some(ca) => curl.arg("--cacert").arg(ca),
        None => curl.arg("-k"),
    };
    if let Some(token) = token {
        curl.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let out = curl.arg(url).output().expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

#[test]
fn the_status_port_is_tls_only_verified_and_needs_the_token_except_for_probes() {
    let mut cluster = single_primary();
    let tls = cluster.dir.path().join("tls");
    let ca = tls.join("ca.crt");
    let port = cluster.member("demo-0").status_port;
    let https = |path: &str| format!("https://localhost:{port}{path}");

    let (code, body) = curl(&https("/status"), Some(&ca), Some(STATUS_TOKEN));
    assert_eq!(code, 200, "verify-full by name with the token: {body}");
    assert!(body.contains("\"pod\":\"demo-0\""), "{body}");
    let (code, body) = curl(&https("/metrics"), Some(&ca), Some(STATUS_TOKEN));
    assert_eq!(code, 200);
    assert!(body.contains("tusk_instance_"), "{body}");

    for path in ["/status", "/metrics", "/upgrade/preflight"] {
        assert_eq!(
            curl(&https(path), Some(&ca), None).0,
            401,
            "{path} without a token"
        );
        let (code, _) = curl(&https(path), Some(&ca), Some("not-the-token"));
        assert_eq!(code, 401, "{path} with a wrong token");
    }
    // The operator's request for a continuity check: the token too; a manager that does not
    // archive has nothing to check.
    let check = https("/archive/check");
    assert_eq!(curl_as("POST", &check, Some(&ca), None).0, 401);
    assert_eq!(
        curl_as("POST", &check, Some(&ca), Some(STATUS_TOKEN)).0,
        404
    );
    for (path, body) in [("/healthz", "ok"), ("/readyz", "ready")] {
        assert_eq!(curl(&https(path), Some(&ca), None), (200, body.to_owned()));
    }

    // Plain HTTP gets no HTTP answer at all, token or not.
    let plain = format!("http://127.0.0.1:{port}/status");
    assert_eq!(curl(&plain, None, Some(STATUS_TOKEN)).0, 0);
    // Another CA's client does not trust it.
    let other = tempfile::tempdir().unwrap();
    let foreign = tusk_testkit::tls::issue(other.path(), &[]);
    assert_eq!(curl(&https("/healthz"), Some(&foreign.ca), None).0, 0);

    // A rotated CA and certificate (as the kubelet swaps a Secret's files) are served by the
    // next connection, by the same manager.
    let pid = cluster.member("demo-0").manager_pid();
    let first_ca = other.path().join("first-ca.crt");
    std::fs::copy(&ca, &first_ca).unwrap();
    assert_eq!(curl(&https("/healthz"), Some(&first_ca), None).0, 200);
    let renewed = tusk_testkit::tls::issue(&tls, &[]);
    for file in [&renewed.ca, &renewed.cert, &renewed.key] {
        chown(file);
    }
    wait_for(
        "the renewed certificate served",
        Duration::from_secs(10),
        || curl(&https("/status"), Some(&renewed.ca), Some(STATUS_TOKEN)).0 == 200,
    );
    // The certificate served is the new one: the first CA, trusted a moment ago, no longer
    // verifies it (an unrelated CA, the check this was, never did).
    assert_eq!(curl(&https("/healthz"), Some(&first_ca), None).0, 0);
    assert_eq!(cluster.member("demo-0").manager_pid(), pid, "no restart");
}
