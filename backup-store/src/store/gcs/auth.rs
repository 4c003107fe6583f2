//! OAuth2 access tokens for the GCS JSON API: a service-account key JSON, the GKE metadata
//! server (Workload Identity), or none for the emulator.
//!
//! The token flows are `gcp_auth`'s (a small crate from a rustls maintainer): it signs the
//! key's JWT and talks to the token endpoint named in the key (so tests can point it at a local
//! one) and to the metadata server, on ring like the rest of the store. `google-cloud-auth`
//! needs a newer Rust than ours and pulls reqwest 0.13 with aws-lc-rs; `yup-oauth2` is built
//! around interactive flows. What stays here is choosing the source and explaining bad keys.

use std::sync::Arc;

use gcp_auth::{CustomServiceAccount, MetadataServiceAccount, TokenProvider as _};
use serde::Deserialize;
use tokio::sync::OnceCell;

use crate::store::{Context, StoreError};

const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The fields checked before the key is handed to `gcp_auth`, for errors that say what is wrong.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    private_key: Option<String>,
    token_uri: Option<String>,
}

enum Source {
    Anonymous,
    ServiceAccount {
        account: Box<CustomServiceAccount>,
        label: String,
    },
    /// Asked for on first use: a store can be opened (and fail later, with a clear message)
    /// where the metadata server is unreachable.
    Metadata(Box<OnceCell<MetadataServiceAccount>>),
}

pub struct TokenProvider {
    source: Source,
}

/// A bearer token; its Debug hides the value.
pub type Token = Arc<gcp_auth::Token>;

impl TokenProvider {
    /// `credentials_file`: GOOGLE_APPLICATION_CREDENTIALS. Without it, an emulator endpoint
    /// means anonymous access, anything else the metadata server.
    pub fn new(credentials_file: Option<&str>, emulator: bool) -> Result<Self, StoreError> {
        let source = match credentials_file {
            Some(path) => Self::from_key_file(path)?,
            None if emulator => Source::Anonymous,
            None => Source::Metadata(Box::default()),
        };
        Ok(TokenProvider { source })
    }

    /// From key JSON held in memory (e.g. read from a Secret); `label` names it in errors.
    pub fn from_key_json(label: &str, json: &str) -> Result<Self, StoreError> {
        Ok(TokenProvider {
            source: Self::parse_key(label, json)?,
        })
    }

    fn from_key_file(path: &str) -> Result<Source, StoreError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            StoreError::config(
                format!("cannot read GOOGLE_APPLICATION_CREDENTIALS file {path}"),
                e,
            )
        })?;
        Self::parse_key(
            &format!("GOOGLE_APPLICATION_CREDENTIALS file {path}"),
            &text,
        )
    }

    fn parse_key(label: &str, text: &str) -> Result<Source, StoreError> {
        // The parse error is left out: it could quote part of the file.
        let key: KeyFile = serde_json::from_str(text).map_err(|_| {
            StoreError::Config(
                format!(
                    "{label} is not a service-account key JSON; \
                     HMAC keys are not supported for GCS, create a service-account key instead"
                )
                .into(),
            )
        })?;
        match key.kind.as_deref() {
            Some("service_account") => {}
            other => {
                return Err(StoreError::Config(
                    format!(
                        "{label} has type {other:?}; only \"service_account\" keys \
                         (or Workload Identity without a file) are supported"
                    )
                    .into(),
                ));
            }
        }
        let (Some(client_email), Some(private_key)) = (key.client_email, key.private_key) else {
            return Err(StoreError::Config(
                format!("{label} lacks client_email or private_key").into(),
            ));
        };
        // gcp_auth needs token_uri, which Google's key files always carry; default it for the
        // hand-made ones that do not.
        let token_uri = key
            .token_uri
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| DEFAULT_TOKEN_URI.to_string());
        let normalized = serde_json::json!({
            "type": "service_account",
            "client_email": client_email,
            "private_key": private_key,
            "token_uri": token_uri,
        });
        let account = CustomServiceAccount::from_json(&normalized.to_string())
            .map_err(|e| StoreError::config(format!("{label}: invalid private_key"), e))?;
        Ok(Source::ServiceAccount {
            account: Box::new(account),
            label: label.to_string(),
        })
    }

    /// A bearer token, or `None` for anonymous access. `gcp_auth` reuses tokens until shortly
    /// before they expire. `location` names the store in errors.
    pub async fn token(&self, location: &str) -> Result<Option<Token>, StoreError> {
        let credentials_error =
            |context: String, source: gcp_auth::Error| StoreError::Credentials {
                location: location.to_string(),
                source: Context::boxed(context, source),
            };
        match &self.source {
            Source::Anonymous => Ok(None),
            Source::ServiceAccount { account, label } => account
                .token(&[SCOPE])
                .await
                .map(Some)
                .map_err(|e| credentials_error(format!("token request for {label}"), e)),
            Source::Metadata(cell) => {
                let unreachable = |e| {
                    credentials_error(
                        "no GOOGLE_APPLICATION_CREDENTIALS and the metadata server is \
                         unreachable (not on GKE with Workload Identity?)"
                            .to_string(),
                        e,
                    )
                };
                let account = cell
                    .get_or_try_init(MetadataServiceAccount::new)
                    .await
                    .map_err(unreachable)?;
                account.token(&[SCOPE]).await.map(Some).map_err(unreachable)
            }
        }
    }
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
        tusk_testkit::rsa_private_key(&pem);
        let (url, server) = token_server().await;
        let key = serde_json::json!({
            "type": "service_account",
            "client_email": "agent@project.iam.gserviceaccount.com",
            "private_key": std::fs::read_to_string(&pem).unwrap(),
            "token_uri": url,
        });
        let provider = TokenProvider::from_key_json("test key", &key.to_string()).unwrap();
        let token = provider.token("gs://test").await.unwrap();
        assert_eq!(token.as_ref().map(|t| t.as_str()), Some("tok-123"));
        let body = server.await.unwrap();
        assert!(
            body.contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"),
            "{body}"
        );
        let assertion = body.split("assertion=").nth(1).unwrap();
        assert_eq!(assertion.split('.').count(), 3, "a JWT: {assertion}");
        // Cached: no second request reaches the (now closed) server.
        let again = provider.token("gs://test").await.unwrap();
        assert_eq!(again.as_ref().map(|t| t.as_str()), Some("tok-123"));
    }
}
