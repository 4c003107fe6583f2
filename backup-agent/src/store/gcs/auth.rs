//! OAuth2 access tokens for the GCS JSON API: service-account key JSON (JWT bearer grant),
//! the GKE metadata server (Workload Identity), or none for the emulator.

use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;

use crate::store::StoreError;

const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
const METADATA_TOKEN_URL: &str =
    "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token";

#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    private_key: Option<String>,
    token_uri: Option<String>,
}

#[derive(Debug)]
enum Source {
    Anonymous,
    ServiceAccount {
        email: String,
        key: jsonwebtoken::EncodingKey,
        token_uri: String,
    },
    Metadata,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    expires_in: Option<u64>,
}

pub struct TokenProvider {
    source: Source,
    cached: Mutex<Option<(String, Instant)>>,
}

fn config_error(message: String) -> StoreError {
    StoreError::Config(message)
}

impl TokenProvider {
    /// `credentials_file`: GOOGLE_APPLICATION_CREDENTIALS. Without it, an emulator endpoint
    /// means anonymous access, anything else the metadata server.
    pub fn new(credentials_file: Option<&str>, emulator: bool) -> Result<Self, StoreError> {
        let source = match credentials_file {
            Some(path) => Self::from_key_file(path)?,
            None if emulator => Source::Anonymous,
            None => Source::Metadata,
        };
        Ok(TokenProvider {
            source,
            cached: Mutex::new(None),
        })
    }

    /// From key JSON held in memory; `label` names it in errors.
    pub fn from_key_json(label: &str, json: &str) -> Result<Self, StoreError> {
        Ok(TokenProvider {
            source: Self::parse_key(label, json)?,
            cached: Mutex::new(None),
        })
    }

    fn from_key_file(path: &str) -> Result<Source, StoreError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            config_error(format!(
                "cannot read GOOGLE_APPLICATION_CREDENTIALS file {path}: {e}"
            ))
        })?;
        Self::parse_key(
            &format!("GOOGLE_APPLICATION_CREDENTIALS file {path}"),
            &text,
        )
    }

    fn parse_key(label: &str, text: &str) -> Result<Source, StoreError> {
        let key: KeyFile = serde_json::from_str(text).map_err(|_| {
            config_error(format!(
                "{label} is not a service-account key JSON; \
                 HMAC keys are not supported for GCS, create a service-account key instead"
            ))
        })?;
        match key.kind.as_deref() {
            Some("service_account") => {}
            other => {
                return Err(config_error(format!(
                    "{label} has type {other:?}; only \
                     \"service_account\" keys (or Workload Identity without a file) are supported"
                )));
            }
        }
        let (Some(email), Some(pem)) = (key.client_email, key.private_key) else {
            return Err(config_error(format!(
                "{label} lacks client_email or private_key"
            )));
        };
        let token_uri = key
            .token_uri
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "https://oauth2.googleapis.com/token".to_string());
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes())
            .map_err(|e| config_error(format!("{label}: invalid private_key: {e}")))?;
        Ok(Source::ServiceAccount {
            email,
            key,
            token_uri,
        })
    }

    /// A bearer token, or `None` for anonymous access. Tokens are reused until shortly
    /// before they expire.
    pub async fn token(&self, http: &reqwest::Client) -> Result<Option<String>, StoreError> {
        if matches!(self.source, Source::Anonymous) {
            return Ok(None);
        }
        let mut cached = self.cached.lock().await;
        if let Some((token, expiry)) = cached.as_ref()
            && Instant::now() + Duration::from_secs(60) < *expiry
        {
            return Ok(Some(token.clone()));
        }
        let response = self.fetch(http).await?;
        let lifetime = Duration::from_secs(response.expires_in.unwrap_or(3600));
        *cached = Some((response.access_token.clone(), Instant::now() + lifetime));
        Ok(Some(response.access_token))
    }

    async fn fetch(&self, http: &reqwest::Client) -> Result<TokenResponse, StoreError> {
        let credentials_error = |message: String| StoreError::Credentials {
            location: "gcs".into(),
            message,
        };
        let request = match &self.source {
            Source::Anonymous => {
                return Err(StoreError::Config("anonymous access has no token".into()));
            }
            Source::Metadata => http
                .get(METADATA_TOKEN_URL)
                .header("Metadata-Flavor", "Google"),
            Source::ServiceAccount {
                email,
                key,
                token_uri,
            } => {
                let assertion = sign_assertion(email, key, token_uri)?;
                http.post(token_uri).form(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", assertion.as_str()),
                ])
            }
        };
        let response = request.send().await.map_err(|e| {
            credentials_error(match self.source {
                Source::Metadata => format!(
                    "no GOOGLE_APPLICATION_CREDENTIALS and the metadata server is unreachable \
                     (not on GKE with Workload Identity?): {e}"
                ),
                _ => format!("token endpoint unreachable: {e}"),
            })
        })?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(credentials_error(format!(
                "token request returned {status}: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        response
            .json::<TokenResponse>()
            .await
            .map_err(|e| credentials_error(format!("invalid token response: {e}")))
    }
}

fn sign_assertion(
    email: &str,
    key: &jsonwebtoken::EncodingKey,
    token_uri: &str,
) -> Result<String, StoreError> {
    #[derive(serde::Serialize)]
    struct Claims<'a> {
        iss: &'a str,
        scope: &'a str,
        aud: &'a str,
        iat: i64,
        exp: i64,
    }
    let now = jiff::Timestamp::now().as_second();
    let claims = Claims {
        iss: email,
        scope: SCOPE,
        aud: token_uri,
        iat: now,
        exp: now + 3600,
    };
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        key,
    )
    .map_err(|e| StoreError::Config(format!("signing the service-account JWT: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(content: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), content).unwrap();
        f
    }

    #[test]
    fn hmac_or_garbage_is_an_explicit_error() {
        let f = write("GOOG1EXAMPLEACCESSID:secret");
        let err = TokenProvider::new(f.path().to_str(), false).err().unwrap();
        assert!(
            err.to_string().contains("HMAC keys are not supported"),
            "{err}"
        );
        let f = write(r#"{"type":"authorized_user"}"#);
        let err = TokenProvider::new(f.path().to_str(), false).err().unwrap();
        assert!(err.to_string().contains("service_account"), "{err}");
    }

    #[test]
    fn missing_file_is_named() {
        let err = TokenProvider::new(Some("/nonexistent/key.json"), false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("/nonexistent/key.json"), "{err}");
    }

    /// A fake OAuth token endpoint: answers one request and hands back its body.
    async fn token_server() -> (String, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let handle = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = socket.read(&mut buf).await.unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        let reply =
                            r#"{"access_token":"tok-123","expires_in":3600,"token_type":"Bearer"}"#;
                        let response = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                            reply.len()
                        );
                        socket.write_all(response.as_bytes()).await.unwrap();
                        return body.to_string();
                    }
                }
            }
        });
        (url, handle)
    }

    #[tokio::test]
    async fn service_account_key_gets_a_token_with_a_signed_jwt() {
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("key.pem");
        // A PKCS#8 RSA key, the format Google's key JSON files carry.
        let status = std::process::Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
            ])
            .arg(&pem)
            .status()
            .expect("openssl");
        assert!(status.success());
        let (url, server) = token_server().await;
        let key = serde_json::json!({
            "type": "service_account",
            "client_email": "agent@project.iam.gserviceaccount.com",
            "private_key": std::fs::read_to_string(&pem).unwrap(),
            "token_uri": url,
        });
        let provider = TokenProvider::from_key_json("test key", &key.to_string()).unwrap();
        let http = reqwest::Client::new();
        let token = provider.token(&http).await.unwrap();
        assert_eq!(token.as_deref(), Some("tok-123"));
        let body = server.await.unwrap();
        assert!(
            body.contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"),
            "{body}"
        );
        let assertion = body.split("assertion=").nth(1).unwrap();
        assert_eq!(assertion.split('.').count(), 3, "a JWT: {assertion}");
        // Cached: no second request reaches the (now closed) server.
        assert_eq!(
            provider.token(&http).await.unwrap().as_deref(),
            Some("tok-123")
        );
    }
}
