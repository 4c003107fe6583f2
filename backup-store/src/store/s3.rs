//! S3 and S3-compatible stores (AWS, MinIO) through aws-sdk-s3.

mod http;
mod upload;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::{Region, RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use bytes::Bytes;

use crate::Redacted;

use super::{
    ByteStream, ListBudget, ObjectInfo, ObjectStore, PendingUpload, Refusal, StoreError, Upload,
    chain,
};

/// S3 DeleteObjects accepts at most 1000 keys per request.
const DELETE_BATCH: usize = 1000;

#[derive(Debug, Clone, Default)]
pub struct S3Config {
    pub bucket: String,
    pub endpoint: Option<String>,
    pub region: String,
    pub force_path_style: bool,
    /// Static keys (e.g. read by the operator from a Secret); the default chain when `None`.
    pub credentials: Option<S3Credentials>,
    /// PEM certificates of a private CA that signed the endpoint's certificate, trusted in
    /// addition to the platform's roots.
    pub ca_bundle: Option<String>,
}

#[derive(Debug, Clone)]
pub struct S3Credentials {
    pub access_key_id: String,
    pub secret_access_key: Redacted<String>,
}

pub struct S3Store {
    client: Client,
    bucket: String,
}

impl S3Store {
    /// Credentials come from the standard AWS chain: env keys, profile, web identity (IRSA), IMDS.
    pub async fn new(config: S3Config) -> Result<Self, StoreError> {
        if let Some(endpoint) = &config.endpoint
            && endpoint.contains("storage.googleapis.com")
        {
            return Err(StoreError::Config(
                "Google Cloud Storage through the S3-compatible (HMAC) API is not supported: \
                 use --store gcs with a service-account key JSON (GOOGLE_APPLICATION_CREDENTIALS)"
                    .into(),
            ));
        }
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(http::client(config.ca_bundle.as_deref())?)
            .region(Region::new(config.region.clone()));
        if let Some(c) = &config.credentials {
            loader = loader.credentials_provider(aws_sdk_s3::config::Credentials::new(
                &c.access_key_id,
                c.secret_access_key.expose(),
                None,
                None,
                "tusk-static",
            ));
        }
        let sdk = loader.load().await;
        let mut builder = aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(config.force_path_style)
            // MinIO and other S3-compatibles reject or mishandle the SDK's default CRC checksums.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        Ok(S3Store {
            client: Client::from_conf(builder.build()),
            bucket: config.bucket,
        })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// ListMultipartUploads under `prefix`, all pages.
    async fn list_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, StoreError> {
        let mut uploads = Vec::new();
        let mut key_marker: Option<String> = None;
        let mut id_marker: Option<String> = None;
        let location = self.location();
        let mut budget = ListBudget::new(&location, format!("ListMultipartUploads {prefix}"));
        loop {
            let page = self
                .client
                .list_multipart_uploads()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(key_marker.take())
                .set_upload_id_marker(id_marker.take())
                .send()
                .await
                .map_err(|e| self.error("ListMultipartUploads", prefix, e))?;
            budget.page(page.uploads().len())?;
            for u in page.uploads() {
                if let (Some(key), Some(id)) = (u.key(), u.upload_id()) {
                    uploads.push(PendingUpload {
                        key: key.to_string(),
                        upload_id: id.to_string(),
                        initiated: u
                            .initiated()
                            .and_then(|t| jiff::Timestamp::from_second(t.secs()).ok()),
                    });
                }
            }
            if page.is_truncated() != Some(true) {
                break;
            }
            key_marker = page.next_key_marker().map(str::to_string);
            id_marker = page.next_upload_id_marker().map(str::to_string);
            if key_marker.is_none() {
                break;
            }
        }
        Ok(uploads)
    }

    fn error<E, R>(&self, operation: &str, key: &str, err: SdkError<E, R>) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + HttpStatus + Send + Sync + 'static,
    {
        classify(&self.location(), operation, key, err)
    }

    /// PutObject; `if_absent` makes it conditional (`If-None-Match: *`).
    async fn put_object(&self, key: &str, body: Bytes, if_absent: bool) -> Result<(), StoreError> {
        let operation = if if_absent {
            "PutObject (If-None-Match)"
        } else {
            "PutObject"
        };
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .set_if_none_match(if_absent.then(|| "*".to_owned()))
            .body(SdkByteStream::from(body))
            .send()
            .await
            .map_err(|e| self.error(operation, key, e))?;
        Ok(())
    }

    async fn delete_one_by_one(&self, keys: &[String]) -> Result<(), StoreError> {
        for key in keys {
            self.client
                .delete_object()
                .bucket(&self.bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| self.error("DeleteObject", key, e))?;
        }
        Ok(())
    }
}

/// The HTTP status of a raw response, used to classify errors without a code (HEAD requests).
pub trait HttpStatus {
    fn http_status(&self) -> u16;
}

/// A listed object as the store's callers see it.
fn object_info(obj: &aws_sdk_s3::types::Object) -> Option<ObjectInfo> {
    Some(ObjectInfo {
        key: obj.key()?.to_string(),
        size: obj.size().and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
        last_modified: obj
            .last_modified()
            .and_then(|t| jiff::Timestamp::from_second(t.secs()).ok()),
    })
}

impl HttpStatus for aws_sdk_s3::config::http::HttpResponse {
    fn http_status(&self) -> u16 {
        self.status().as_u16()
    }
}

pub(crate) fn classify<E, R>(
    location: &str,
    operation: &str,
    key: &str,
    err: SdkError<E, R>,
) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + HttpStatus + Send + Sync + 'static,
{
    let status = err.raw_response().map(HttpStatus::http_status);
    let code = err.code().map(str::to_string);
    // No response and credentials named anywhere in the error: none could be loaded. (The
    // debug view is searched too, as it was when it was part of the message.)
    let credentials_missing =
        status.is_none() && format!("{} ({err:?})", chain(&err)).contains("credentials");
    let refusal = match (code.as_deref(), status) {
        (Some("NoSuchBucket"), _) => Refusal::NoSuchBucket,
        (
            Some(
                "InvalidAccessKeyId"
                | "SignatureDoesNotMatch"
                | "AccessDenied"
                | "InvalidToken"
                | "ExpiredToken"
                | "InvalidClientTokenId",
            ),
            _,
        )
        | (_, Some(401 | 403)) => Refusal::Credentials,
        (Some("NoSuchKey" | "NotFound"), _) | (None, Some(404)) => Refusal::NotFound,
        // Only conditional requests fail with these: the key exists, or another conditional
        // write of it is in flight (409 ConditionalRequestConflict, AWS).
        (Some("PreconditionFailed" | "ConditionalRequestConflict"), _) | (_, Some(412)) => {
            Refusal::AlreadyExists
        }
        _ if credentials_missing => Refusal::Credentials,
        _ => Refusal::Other,
    };
    refusal.error(location, operation, key, err)
}

#[async_trait]
impl ObjectStore for S3Store {
    fn location(&self) -> String {
        format!("s3://{}", self.bucket)
    }

    async fn check(&self) -> Result<(), StoreError> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(()),
            Err(e) => match self.error("HeadBucket", "", e) {
                // HEAD has no body, so a missing bucket only shows as a bare 404.
                StoreError::NotFound { location, .. } => Err(StoreError::NoSuchBucket {
                    location,
                    source: "HeadBucket returned 404".into(),
                }),
                other => Err(other),
            },
        }
    }

    async fn put(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        self.put_object(key, body, false).await
    }

    async fn put_if_absent(&self, key: &str, body: Bytes) -> Result<(), StoreError> {
        // Conditional writes: AWS since 2024-08, MinIO since RELEASE.2024-08 (the pinned test
        // server is newer; backup-agent/tests/shared_prefixes.rs checks it against it).
        self.put_object(key, body, true).await
    }

    async fn begin_upload(&self, key: &str) -> Result<Box<dyn Upload>, StoreError> {
        let upload = upload::S3Upload::begin(self.client.clone(), &self.bucket, key).await?;
        Ok(Box::new(upload))
    }

    async fn get(&self, key: &str) -> Result<ByteStream, StoreError> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| self.error("GetObject", key, e))?;
        Ok(Box::pin(tokio_util::io::ReaderStream::new(
            out.body.into_async_read(),
        )))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        let mut objects = Vec::new();
        let location = self.location();
        let mut budget = ListBudget::new(&location, format!("ListObjectsV2 {prefix}"));
        // The SDK's paginator follows continuation tokens (and stops on a repeated one).
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.error("ListObjectsV2", prefix, e))?;
            budget.page(page.contents().len())?;
            objects.extend(page.contents().iter().filter_map(object_info));
        }
        Ok(objects)
    }

    async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        let page = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .set_start_after(after.map(str::to_owned))
            .max_keys(super::LIST_PAGE as i32)
            .send()
            .await
            .map_err(|e| self.error("ListObjectsV2", prefix, e))?;
        Ok(page.contents().iter().filter_map(object_info).collect())
    }

    async fn delete_many(&self, keys: &[String]) -> Result<(), StoreError> {
        for batch in keys.chunks(DELETE_BATCH) {
            let ids = batch
                .iter()
                .map(|k| ObjectIdentifier::builder().key(k).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::config("building DeleteObjects request", e))?;
            let delete = Delete::builder()
                .set_objects(Some(ids))
                .quiet(true)
                .build()
                .map_err(|e| StoreError::config("building DeleteObjects request", e))?;
            let result = self
                .client
                .delete_objects()
                .bucket(&self.bucket)
                .delete(delete)
                .send()
                .await;
            match result {
                Ok(out) => {
                    // Keys the bulk call reported as failed get a second, individual try.
                    let failed: Vec<String> = out
                        .errors()
                        .iter()
                        .filter_map(|e| e.key().map(str::to_string))
                        .collect();
                    if !failed.is_empty() {
                        tracing::warn!(
                            count = failed.len(),
                            "bulk delete left keys, retrying one by one"
                        );
                        self.delete_one_by_one(&failed).await?;
                    }
                }
                Err(e) => {
                    let err = self.error("DeleteObjects", "", e);
                    if matches!(err, StoreError::NoSuchBucket { .. }) {
                        return Err(err);
                    }
                    // Some S3-compatibles (GCS XML API, some gateways) refuse bulk delete.
                    tracing::warn!(error = %err, "bulk delete refused, deleting one by one");
                    self.delete_one_by_one(batch).await?;
                }
            }
        }
        Ok(())
    }

    async fn pending_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, StoreError> {
        let found = self.list_uploads(prefix).await?;
        if !found.is_empty() {
            return Ok(found);
        }
        // MinIO only honours an empty or exact-key prefix here: list everything and filter.
        match self.list_uploads("").await {
            Ok(all) => Ok(all
                .into_iter()
                .filter(|u| u.key.starts_with(prefix))
                .collect()),
            Err(StoreError::Credentials { .. }) => Ok(found),
            Err(e) => Err(e),
        }
    }

    async fn abort_pending(&self, upload: &PendingUpload) -> Result<(), StoreError> {
        upload::abort(&self.client, &self.bucket, &upload.key, &upload.upload_id).await
    }
}
