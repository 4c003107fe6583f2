//! A GCS front that checks credentials, since fake-gcs-server accepts anything: a token
//! endpoint that verifies the service-account JWT's RS256 signature against the public half of
//! a key pair made for the test, and a gateway that forwards to fake-gcs-server only requests
//! bearing a token it issued. A store that ignores its key (and goes anonymous) gets 401.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::{openssl, rsa_private_key};

/// Bodies are buffered: test objects are a few parts of a few MiB.
const BODY_LIMIT: usize = 256 << 20;

/// A service-account key whose `token_uri` is the gateway's token endpoint.
pub struct ServiceAccount {
    pub email: String,
    /// The key JSON, as a user puts it into a Secret.
    pub json: String,
    /// The same JSON as a file (GOOGLE_APPLICATION_CREDENTIALS for the agent).
    pub file: std::path::PathBuf,
    /// PKCS#1 DER of the public key.
    public_der: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl ServiceAccount {
    /// A fresh RSA key pair (openssl, the format Google's key files carry).
    pub fn generate(token_uri: &str) -> ServiceAccount {
        let dir = tempfile::tempdir().expect("temp dir");
        let pem = dir.path().join("key.pem");
        let public = dir.path().join("public.der");
        rsa_private_key(&pem);
        openssl(&[
            "rsa",
            "-in",
            path(&pem),
            "-RSAPublicKey_out",
            "-outform",
            "DER",
            "-out",
            path(&public),
        ]);
        let email = "tusk-backups@test-project.iam.gserviceaccount.com".to_string();
        let json = serde_json::json!({
            "type": "service_account",
            "project_id": "test-project",
            "client_email": email,
            "private_key": std::fs::read_to_string(&pem).expect("read key"),
            "token_uri": token_uri,
        })
        .to_string();
        let file = dir.path().join("key.json");
        std::fs::write(&file, &json).expect("write key.json");
        ServiceAccount {
            email,
            json,
            file,
            public_der: std::fs::read(&public).expect("read public key"),
            _dir: dir,
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

struct Shared {
    upstream: String,
    token_uri: String,
    email: String,
    public_der: Vec<u8>,
    issued: Mutex<HashSet<String>>,
    /// Assertions whose signature, issuer and audience checked out.
    verified: AtomicUsize,
    /// Storage requests refused for lack of a valid token.
    refused: AtomicUsize,
    /// Token requests refused (a JWT not signed with the account's key, say).
    rejected: AtomicUsize,
    http: reqwest::Client,
}

/// The token endpoint and the authenticating gateway, on one loopback port.
pub struct Gateway {
    pub endpoint: String,
    pub account: ServiceAccount,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Gateway {
    /// Binds the gateway's port (fake-gcs-server must know it as its external URL before it
    /// starts: resumable-upload sessions are URLs); [`Gateway::serve`] then forwards to it.
    pub async fn bind() -> (tokio::net::TcpListener, String) {
        Self::bind_at("127.0.0.1:0")
            .await
            .expect("bind gateway on a free port")
    }

    /// As [`Gateway::bind`], at a given address: the e2e environment fixes it beforehand,
    /// since the operator process reads its GCS endpoint at start.
    pub async fn bind_at(addr: &str) -> std::io::Result<(tokio::net::TcpListener, String)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        Ok((listener, endpoint))
    }

    pub fn serve(listener: tokio::net::TcpListener, endpoint: String, upstream: &str) -> Gateway {
        let token_uri = format!("{endpoint}/token");
        let account = ServiceAccount::generate(&token_uri);
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            token_uri,
            email: account.email.clone(),
            public_der: account.public_der.clone(),
            issued: Mutex::default(),
            verified: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            rejected: AtomicUsize::new(0),
            http: reqwest::Client::builder()
                // 308 is GCS's "resume incomplete", for the client to see, not to follow.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
        });
        let app = axum::Router::new()
            .route("/token", axum::routing::post(token))
            .fallback(forward)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("gateway");
        });
        Gateway {
            endpoint,
            account,
            shared,
            task,
        }
    }

    /// How many JWT assertions signed with the key were verified and answered with a token.
    pub fn verified(&self) -> usize {
        self.shared.verified.load(Ordering::SeqCst)
    }

    /// How many storage requests came without a token this gateway issued.
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// How many token requests were refused (assertions that did not verify).
    pub fn rejected(&self) -> usize {
        self.shared.rejected.load(Ordering::SeqCst)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The OAuth2 JWT-bearer grant: checks the assertion, then issues an access token.
async fn token(State(s): State<Arc<Shared>>, body: String) -> Response {
    match verify_grant(&s, &body) {
        Ok(()) => {
            let n = s.verified.fetch_add(1, Ordering::SeqCst);
            let token = format!("ya29.test-{n}");
            s.issued.lock().expect("lock").insert(token.clone());
            json(
                StatusCode::OK,
                serde_json::json!({
                    "access_token": token, "expires_in": 3600, "token_type": "Bearer",
                }),
            )
        }
        Err(why) => {
            s.rejected.fetch_add(1, Ordering::SeqCst);
            json(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": "invalid_grant", "error_description": why}),
            )
        }
    }
}

fn json(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn verify_grant(s: &Shared, body: &str) -> Result<(), String> {
    let form: std::collections::HashMap<String, String> = body
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect();
    if form.get("grant_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    {
        return Err(format!("grant_type {:?}", form.get("grant_type")));
    }
    let assertion = form.get("assertion").ok_or("no assertion")?;
    let mut parts = assertion.split('.');
    let (Some(head), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a JWT".into());
    };
    let signature = base64url(signature)?;
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        &s.public_der,
    )
    .verify(format!("{head}.{claims}").as_bytes(), &signature)
    .map_err(|_| "RS256 signature does not verify with the account's public key")?;
    let json = |part: &str| -> Result<serde_json::Value, String> {
        let bytes = base64url(part)?;
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    };
    let (head, claims) = (json(head)?, json(claims)?);
    if head["alg"] != "RS256" {
        return Err(format!("alg {}", head["alg"]));
    }
    if claims["iss"] != s.email.as_str() || claims["aud"] != s.token_uri.as_str() {
        return Err(format!("iss {} / aud {}", claims["iss"], claims["aud"]));
    }
    let scope = claims["scope"].as_str().unwrap_or_default();
    if !scope.contains("devstorage") {
        return Err(format!("scope {scope:?}"));
    }
    Ok(())
}

/// gcp_auth pads its JWT segments; RFC 7515 does not: accept both.
fn base64url(segment: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD
        .decode(segment.trim_end_matches('='))
        .map_err(|e| e.to_string())
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// Forwards a storage request to fake-gcs-server if it bears a token issued here.
async fn forward(State(s): State<Arc<Shared>>, request: Request) -> Response {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    if !bearer.is_some_and(|t| s.issued.lock().expect("lock").contains(&t)) {
        s.refused.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::UNAUTHORIZED, "no valid bearer token").into_response();
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, BODY_LIMIT).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response();
    };
    let target = format!(
        "{}{}",
        s.upstream,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let upstream = s
        .http
        .request(parts.method, target)
        .headers(end_to_end(&parts.headers))
        .body(body)
        .send()
        .await;
    let response = match upstream {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = response.status();
    let headers = end_to_end(response.headers());
    let body = response.bytes().await.unwrap_or_default();
    let mut out = Response::new(Body::from(body));
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

/// Headers without the hop-by-hop ones and the framing the buffered body re-derives.
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let mut out = headers.clone();
    for name in [
        header::HOST,
        header::AUTHORIZATION,
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
    ] {
        out.remove(name);
    }
    out
}
