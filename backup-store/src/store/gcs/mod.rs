//! Google Cloud Storage through its JSON API (also served by fake-gcs-server).
//!
//! Chosen over HMAC-through-S3 because GKE users hold service-account keys or Workload
//! Identity, not HMAC keys; see the README.

mod auth;
mod upload;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;

use crate::Redacted;

use super::{
    ByteStream, Context, HttpStatus, ListBudget, ObjectInfo, ObjectStore, PendingUpload, Refusal,
    StoreError, Upload, read_capped,
};
pub use auth::TokenProvider;

const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";
/// Tries per request for connection errors, 429 and 5xx (the SDK does the same for S3).
const ATTEMPTS: u32 = 3;
const RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(500);
/// Concurrent single-object deletes (the JSON API has no bulk delete outside batch requests).
const DELETE_CONCURRENCY: usize = 8;
/// Largest list page read (1000 entries of object metadata are well under 1 MiB).
const MAX_PAGE_BYTES: usize = 16 << 20;
/// How much of a refusal's body is read for the error message.
const MAX_ERROR_BYTES: usize = 4096;
/// Everything but RFC 3986 unreserved characters is encoded in object names.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

#[derive(Debug, Clone, Default)]
pub struct GcsConfig {
    pub bucket: String,
    /// Emulator endpoint, e.g. `http://127.0.0.1:4443`; real GCS when `None`.
    pub endpoint: Option<String>,
    /// Path of a service-account key JSON (GOOGLE_APPLICATION_CREDENTIALS).
    pub credentials_file: Option<String>,
    /// The key JSON itself (e.g. read by the operator from a Secret). Takes precedence over
    /// `credentials_file`: it is what the user named on the destination.
    pub credentials_json: Option<Redacted<String>>,
}

pub struct GcsStore {
    http: reqwest::Client,
    base: String,
    bucket: String,
    auth: std::sync::Arc<TokenProvider>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListPage {
    #[serde(default)]
    items: Vec<ListItem>,
    next_page_token: Option<String>,
}

fn object_info(item: ListItem) -> ObjectInfo {
    ObjectInfo {
        size: match &item.size {
            Some(serde_json::Value::String(s)) => s.parse().unwrap_or(0),
            Some(serde_json::Value::Number(n)) => n.as_u64().unwrap_or(0),
            _ => 0,
        },
        last_modified: item.updated.as_deref().and_then(|u| u.parse().ok()),
        key: item.name,
    }
}

#[derive(Deserialize)]
struct ListItem {
    name: String,
    /// The API sends sizes as decimal strings.
    size: Option<serde_json::Value>,
    updated: Option<String>,
}

pub(crate) fn encode(name: &str) -> String {
    utf8_percent_encode(name, SEGMENT).to_string()
}

impl GcsStore {
    /// One `objects.list` request under `prefix`: at most `max` items, with `extra` (a page
    /// token or a start offset).
    async fn page(
        &self,
        prefix: &str,
        max: usize,
        extra: Option<(&str, &str)>,
    ) -> Result<ListPage, StoreError> {
        let url = format!("{}/storage/v1/b/{}/o", self.base, encode(&self.bucket));
        let (location, operation) = (self.location(), format!("list {prefix}"));
        let max = max.to_string();
        let mut request = (self.http.get(&url)).query(&[("prefix", prefix), ("maxResults", &max)]);
        if let Some(pair) = extra {
            request = request.query(&[pair]);
        }
        let response = self
            .send(request, "list", prefix)
            .await
            .map_err(bucket_missing)?;
        let body =
            read_capped(body_stream(response), MAX_PAGE_BYTES, &location, &operation).await?;
        serde_json::from_slice(&body).map_err(|e| StoreError::Other {
            location,
            operation,
            source: Context::boxed("invalid response", e),
        })
    }

    /// The media-upload endpoint of the bucket.
    fn upload_url(&self) -> String {
        format!(
            "{}/upload/storage/v1/b/{}/o",
            self.base,
            encode(&self.bucket)
        )
    }

    pub fn new(config: GcsConfig) -> Result<Self, StoreError> {
        let auth = match &config.credentials_json {
            Some(json) => TokenProvider::from_key_json(
                &format!("the service-account key for gs://{}", config.bucket),
                json.expose(),
            )?,
            None => TokenProvider::new(
                config.credentials_file.as_deref(),
                config.endpoint.is_some(),
            )?,
        };
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| StoreError::config("HTTP client", e))?;
        let base = config
            .endpoint
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
            .trim_end_matches('/')
            .to_string();
        Ok(GcsStore {
            http,
            base,
            bucket: config.bucket,
            auth: std::sync::Arc::new(auth),
        })
    }

    /// A one-request upload of `body` to `key`, with extra query `conditions`.
    async fn media_upload(
        &self,
        key: &str,
        body: Bytes,
        conditions: &[(&str, &str)],
    ) -> Result<(), StoreError> {
        let request = self
            .http
            .post(self.upload_url())
            .query(&[("uploadType", "media"), ("name", key)])
            .query(conditions)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(body);
        self.send(request, "upload", key)
            .await
            .map_err(bucket_missing)?;
        Ok(())
    }

    fn object_url(&self, key: &str) -> String {
        format!(
            "{}/storage/v1/b/{}/o/{}",
            self.base,
            encode(&self.bucket),
            encode(key)
        )
    }

    async fn delete_one(&self, key: String) -> Result<(), StoreError> {
        match self
            .send(self.http.delete(self.object_url(&key)), "delete", &key)
            .await
        {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        operation: &str,
        key: &str,
    ) -> Result<reqwest::Response, StoreError> {
        send(&self.auth, &self.location(), request, operation, key).await
    }
}

fn body_stream(response: reqwest::Response) -> ByteStream {
    Box::pin(response.bytes_stream().map_err(std::io::Error::other))
}

/// For bucket-level calls (list, upload, bucket metadata) a 404 can only mean the bucket.
fn bucket_missing(err: StoreError) -> StoreError {
    match err {
        StoreError::NotFound { location, .. } => StoreError::NoSuchBucket {
            location,
            source: "HTTP 404".into(),
        },
        other => other,
    }
}

/// Authorizes and sends a request, mapping HTTP failures to [`StoreError`]s.
pub(crate) async fn send(
    auth: &TokenProvider,
    location: &str,
    request: reqwest::RequestBuilder,
    operation: &str,
    key: &str,
) -> Result<reqwest::Response, StoreError> {
    let mut delay = RETRY_DELAY;
    let mut attempt = 1;
    let mut pending = request;
    loop {
        // Bodies sent here are in memory (Bytes, JSON, forms), so a spare clone is cheap.
        let spare = if attempt < ATTEMPTS {
            pending.try_clone()
        } else {
            None
        };
        let mut this = pending;
        if let Some(token) = auth.token(location).await? {
            this = this.bearer_auth(token.as_str());
        }
        let outcome = this.send().await;
        let transient = match &outcome {
            Err(e) => !e.is_builder(),
            Ok(r) => r.status().as_u16() == 429 || r.status().is_server_error(),
        };
        match (transient, spare) {
            (true, Some(next)) => {
                tracing::warn!(operation, key, attempt, "transient GCS error, retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
                pending = next;
            }
            _ => return classify(outcome, location, operation, key).await,
        }
    }
}

async fn classify(
    outcome: reqwest::Result<reqwest::Response>,
    location: &str,
    operation: &str,
    key: &str,
) -> Result<reqwest::Response, StoreError> {
    let response = outcome.map_err(|e| {
        Refusal::Other.error(
            location,
            operation,
            key,
            Context::boxed("request failed", e),
        )
    })?;
    let status = response.status();
    if status.is_success() || status.as_u16() == 308 {
        return Ok(response);
    }
    // Only the start of the body: the message quotes 300 characters of it.
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < MAX_ERROR_BYTES
        && let Some(Ok(chunk)) = chunks.next().await
    {
        body.extend_from_slice(&chunk);
    }
    let body = String::from_utf8_lossy(&body);
    let refused = HttpStatus {
        status: status.to_string(),
        body: body.chars().take(300).collect(),
    };
    let refusal = match status.as_u16() {
        401 | 403 => Refusal::Credentials,
        404 => Refusal::NotFound,
        // Only preconditioned requests (ifGenerationMatch=0) fail with 412: the object exists.
        412 => Refusal::AlreadyExists,
        _ => Refusal::Other,
    };
    Err(refusal.error(location, operation, key, refused))
}

#[async_trait]
impl ObjectStore for GcsStore {
    fn location(&self) -> String {
        format!("gs://{}", self.bucket)
    }

    async fn check(&self) -> Result<(), StoreError> {
        let url = format!("{}/storage/v1/b/{}", self.base, encode(&self.bucket));
        self.send(self.http.get(url), "get bucket", "")
            .await
            .map_err(bucket_missing)?;
        Ok(())
    }

    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.media_upload(key, body, &[]).await
    }

    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        // Generation 0 means "no live object": the server refuses (412) if the key exists.
        self.media_upload(key, body, &[("ifGenerationMatch", "0")])
            .await
    }

    async fn begin_upload(&self, key: &str) -> Result<Box<dyn Upload>, StoreError> {
        let url = self.upload_url();
        let request = self
            .http
            .post(url)
            .query(&[("uploadType", "resumable"), ("name", key)])
            .json(&serde_json::json!({ "name": key }));
        let response = self
            .send(request, "start resumable upload", key)
            .await
            .map_err(bucket_missing)?;
        let session = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| StoreError::Other {
                location: self.location(),
                operation: format!("start resumable upload {key}"),
                source: "no Location header in response".into(),
            })?
            .to_string();
        Ok(Box::new(upload::GcsUpload::new(
            self.http.clone(),
            self.auth.clone(),
            self.location(),
            key.to_string(),
            session,
        )))
    }

    async fn get(&self, key: &str) -> Result<ByteStream, StoreError> {
        let request = self
            .http
            .get(self.object_url(key))
            .query(&[("alt", "media")]);
        let response = self.send(request, "download", key).await?;
        Ok(body_stream(response))
    }

    async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        // startOffset is inclusive: one more, as the key itself is dropped.
        let max = super::LIST_PAGE + usize::from(after.is_some());
        let extra = after.map(|a| ("startOffset", a));
        let page = self.page(prefix, max, extra).await?;
        Ok(page
            .items
            .into_iter()
            .filter(|item| after.is_none_or(|a| item.name.as_str() > a))
            .take(super::LIST_PAGE)
            .map(object_info)
            .collect())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        let mut objects = Vec::new();
        let mut token: Option<String> = None;
        let location = self.location();
        let mut budget = ListBudget::new(&location, format!("list {prefix}"));
        loop {
            let extra = token.as_deref().map(|t| ("pageToken", t));
            let page = self.page(prefix, super::LIST_PAGE, extra).await?;
            budget.page(page.items.len())?;
            objects.extend(page.items.into_iter().map(object_info));
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
        Ok(objects)
    }

    async fn delete_many(&self, keys: &[String]) -> Result<(), StoreError> {
        let results: Vec<Result<(), StoreError>> = futures::stream::iter(keys.iter().cloned())
            .map(|key: String| self.delete_one(key))
            .buffer_unordered(DELETE_CONCURRENCY)
            .collect()
            .await;
        results.into_iter().collect()
    }

    async fn pending_uploads(&self, _prefix: &str) -> Result<Vec<PendingUpload>, StoreError> {
        // Resumable sessions cannot be listed; an unfinished one never creates an object and
        // expires on its own after a week.
        Ok(Vec::new())
    }

    async fn abort_pending(&self, _upload: &PendingUpload) -> Result<(), StoreError> {
        Ok(())
    }
}
