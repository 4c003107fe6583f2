//! The reader against a real TLS server on loopback (the manager's side is proven in
//! instance/tests/status_port.rs): it is admitted only by the cluster's CA and by name, sends
//! the token, and forgets a cluster's access when refused.

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::*;
use crate::runtime::instances::{UpgradeAnswer, UpgradeRequest};

const TOKEN: &str = "the-token";

/// TLS with the certificate in `dir`.
fn acceptor(dir: &Path) -> TlsAcceptor {
    let cert = std::fs::read(dir.join("tls.crt")).unwrap();
    let key = std::fs::read(dir.join("tls.key")).unwrap();
    let chain = CertificateDer::pem_slice_iter(&cert)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    TlsAcceptor::from(Arc::new(config))
}

/// A server with the certificate in `dir` (names `localhost`) answering one request: the
/// report of `demo-1` when the token is presented, else 401. Returns its port.
async fn server(dir: &Path) -> u16 {
    let acceptor = acceptor(dir);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let mut head = vec![0; 4096];
            let n = tls.read(&mut head).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&head[..n]).to_string();
            let response = if head.contains(&format!("authorization: Bearer {TOKEN}\r\n")) {
                let body = r#"{"pod":"demo-1","role":"replica","postgres":"running"}"#;
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_owned()
            };
            let _ = tls.write_all(response.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    port
}

/// A reader whose client is never called: the cluster's access is remembered already.
fn reader(port: u16, ca: &Path, token: &str) -> InstanceReader {
    let (service, _handle) = tower_test::mock::pair::<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >();
    let reader = InstanceReader::new(kube::Client::new(service, "prod"), port);
    let pem = std::fs::read(ca).unwrap();
    let access = Arc::new(Access {
        ca_fingerprint: tls::ca_fingerprint(&String::from_utf8_lossy(&pem)),
        tls: connector(&pem).unwrap(),
        token: token.to_owned(),
        read_at: Instant::now(),
    });
    reader
        .remembered()
        .insert(("prod".into(), "demo".into()), access);
    reader
}

fn address(server_name: &str) -> InstanceAddress {
    InstanceAddress {
        namespace: "prod".into(),
        cluster: "demo".into(),
        pod: "demo-1".into(),
        ip: "127.0.0.1".into(),
        tls: true,
        server_name: server_name.into(),
        server_secret: "demo-server-tls".into(),
        token_secret: "demo-monitoring".into(),
        ca_fingerprint: None,
    }
}

#[tokio::test]
async fn a_remembered_ca_is_not_used_once_the_cache_knows_another_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let files = tusk_testkit::tls::issue(dir.path(), &["demo-1.demo-hl.prod.svc"]);
    let port = server(dir.path()).await;
    let reader = reader(port, &files.ca, TOKEN);
    let ca = std::fs::read_to_string(&files.ca).unwrap();
    let mut current = address("demo-1.demo-hl.prod.svc");
    current.ca_fingerprint = Some(tls::ca_fingerprint(&ca));
    assert!(reader.report(&current).await.is_some(), "the same bundle");
    // A rotation step rewrote the server Secret: the remembered CA is read again (here from
    // an API server that does not answer), not tried on the pod.
    let mut rotated = current.clone();
    rotated.ca_fingerprint = Some(tls::ca_fingerprint("a bundle with the next CA"));
    assert!(reader.report(&rotated).await.is_none());
}

#[tokio::test]
async fn reads_a_report_over_verified_tls_with_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let files = tusk_testkit::tls::issue(dir.path(), &["demo-1.demo-hl.prod.svc"]);
    let port = server(dir.path()).await;
    let reader = reader(port, &files.ca, TOKEN);
    let report = reader.report(&address("demo-1.demo-hl.prod.svc")).await;
    assert_eq!(report.map(|r| r.pod), Some("demo-1".to_owned()));
    assert_eq!(reader.remembered().len(), 1);
}

#[tokio::test]
async fn another_ca_another_name_or_a_wrong_token_gets_nothing_and_forgets_the_access() {
    let dir = tempfile::tempdir().unwrap();
    tusk_testkit::tls::issue(dir.path(), &["demo-1.demo-hl.prod.svc"]);
    let port = server(dir.path()).await;
    let other = tempfile::tempdir().unwrap();
    let foreign = tusk_testkit::tls::issue(other.path(), &["demo-1.demo-hl.prod.svc"]);
    let cases = [
        (
            foreign.ca.clone(),
            "demo-1.demo-hl.prod.svc",
            TOKEN,
            "another CA",
        ),
        (
            dir.path().join("ca.crt"),
            "demo-2.demo-hl.prod.svc",
            TOKEN,
            "a name not in it",
        ),
        (
            dir.path().join("ca.crt"),
            "demo-1.demo-hl.prod.svc",
            "stale",
            "a wrong token",
        ),
    ];
    for (ca, name, token, case) in cases {
        let reader = reader(port, &ca, token);
        assert!(reader.report(&address(name)).await.is_none(), "{case}");
        assert!(reader.remembered().is_empty(), "{case}: access forgotten");
    }
}

#[test]
fn a_connector_trusts_only_pem_certificates() {
    assert!(connector(b"not a certificate").is_none());
    assert!(connector(b"").is_none());
}

#[tokio::test]
async fn a_report_of_another_pod_or_a_pod_without_tls_is_not_taken() {
    let dir = tempfile::tempdir().unwrap();
    let files = tusk_testkit::tls::issue(dir.path(), &["demo-1.demo-hl.prod.svc"]);
    let port = server(dir.path()).await;
    let reader = reader(port, &files.ca, TOKEN);
    // The server answers as demo-1 (one certificate names every pod): asked for demo-2 at
    // that address, the reader takes nothing.
    let mut other = address("demo-1.demo-hl.prod.svc");
    other.pod = "demo-2".into();
    assert!(reader.report(&other).await.is_none());
    // Nor does it read a pod in clear, whatever it would answer.
    let mut plain = address("demo-1.demo-hl.prod.svc");
    plain.tls = false;
    assert!(reader.report(&plain).await.is_none());
    assert!(
        reader
            .report(&address("demo-1.demo-hl.prod.svc"))
            .await
            .is_some()
    );
}

/// A server (certificate in `dir`) answering each request with its request line and body when
/// the token is presented, else 401. Returns its port.
async fn echo_server(dir: &Path) -> u16 {
    let acceptor = acceptor(dir);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let mut seen = Vec::new();
            let mut chunk = vec![0; 4096];
            // The head, then as many bytes as it announces.
            let (head, body) = loop {
                let n = tls.read(&mut chunk).await.unwrap_or(0);
                seen.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&seen).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = (head.lines())
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .and_then(|l| l.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if body.len() >= length || n == 0 {
                        break (format!("{head}\r\n"), body.to_owned());
                    }
                }
                if n == 0 {
                    break (text, String::new());
                }
            };
            let response = if head.contains(&format!("authorization: Bearer {TOKEN}\r\n")) {
                let line = head.lines().next().unwrap_or_default();
                let answer = format!("{line}|{body}");
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                )
            } else {
                "HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_owned()
            };
            let _ = tls.write_all(response.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    port
}

#[tokio::test]
async fn an_upgrade_request_carries_its_method_path_and_body_with_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let files = tusk_testkit::tls::issue(dir.path(), &["demo-1.demo-hl.prod.svc"]);
    let port = echo_server(dir.path()).await;
    let reader = reader(port, &files.ca, TOKEN);
    let at = address("demo-1.demo-hl.prod.svc");
    let body = r#"{"lsn":"0/3000148"}"#.to_owned();
    let post = UpgradeRequest::post("/upgrade/confirmed", body.clone());
    let answer = reader.upgrade_request(&at, &post).await;
    assert_eq!(
        answer,
        Some(UpgradeAnswer {
            status: 200,
            body: format!("POST /upgrade/confirmed HTTP/1.1|{body}")
        })
    );
    let get = UpgradeRequest::get("/upgrade/progress");
    let answer = reader.upgrade_request(&at, &get).await.map(|a| a.body);
    assert_eq!(answer.as_deref(), Some("GET /upgrade/progress HTTP/1.1|"));
    // A wrong token is refused, and the access forgotten (read again from the API next time).
    let wrong = self::reader(port, &files.ca, "not-the-token");
    assert_eq!(wrong.upgrade_request(&at, &get).await, None);
    assert!(wrong.remembered().is_empty());
}
