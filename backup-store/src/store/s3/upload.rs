//! Multipart upload with a bounded number of parts in flight.

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::Bytes;
use tokio::task::JoinSet;

use super::classify;
use crate::store::{Context, StoreError, Upload};

/// 8 MiB parts: above S3's 5 MiB minimum, 10,000 parts allow 78 GiB per database dump.
pub const PART_SIZE: usize = 8 * 1024 * 1024;
/// Parts uploading concurrently; memory is about (MAX_IN_FLIGHT + 1) * PART_SIZE.
const MAX_IN_FLIGHT: usize = 2;

pub struct S3Upload {
    client: Client,
    bucket: String,
    key: String,
    upload_id: String,
    next_part: i32,
    in_flight: JoinSet<Result<CompletedPart, StoreError>>,
    done: Vec<CompletedPart>,
}

impl S3Upload {
    pub async fn begin(client: Client, bucket: &str, key: &str) -> Result<Self, StoreError> {
        let location = format!("s3://{bucket}");
        let out = client
            .create_multipart_upload()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| classify(&location, "CreateMultipartUpload", key, e))?;
        let upload_id = out.upload_id().ok_or_else(|| StoreError::Other {
            location,
            operation: format!("CreateMultipartUpload {key}"),
            source: "response has no upload id".into(),
        })?;
        Ok(S3Upload {
            client,
            bucket: bucket.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
            next_part: 1,
            in_flight: JoinSet::new(),
            done: Vec::new(),
        })
    }

    fn location(&self) -> String {
        format!("s3://{}", self.bucket)
    }

    fn spawn_part(&mut self, data: Bytes) {
        let client = self.client.clone();
        let (bucket, key, upload_id) = (
            self.bucket.clone(),
            self.key.clone(),
            self.upload_id.clone(),
        );
        let number = self.next_part;
        self.next_part += 1;
        self.in_flight.spawn(async move {
            let out = client
                .upload_part()
                .bucket(&bucket)
                .key(&key)
                .upload_id(&upload_id)
                .part_number(number)
                .body(SdkByteStream::from(data))
                .send()
                .await
                .map_err(|e| classify(&format!("s3://{bucket}"), "UploadPart", &key, e))?;
            Ok(CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_string))
                .build())
        });
    }

    async fn wait_one(&mut self) -> Result<(), StoreError> {
        if let Some(joined) = self.in_flight.join_next().await {
            let part = joined.map_err(|e| StoreError::Other {
                location: self.location(),
                operation: format!("UploadPart {}", self.key),
                source: Context::boxed("upload task failed", e),
            })??;
            self.done.push(part);
        }
        Ok(())
    }
}

#[async_trait]
impl Upload for S3Upload {
    fn part_size(&self) -> usize {
        PART_SIZE
    }

    async fn put_part(&mut self, data: Bytes) -> Result<(), StoreError> {
        while self.in_flight.len() >= MAX_IN_FLIGHT {
            self.wait_one().await?;
        }
        self.spawn_part(data);
        Ok(())
    }

    async fn complete(mut self: Box<Self>, last: Bytes) -> Result<(), StoreError> {
        // S3 needs at least one part; an empty final part is only sent when it is the only one.
        if !last.is_empty() || self.next_part == 1 {
            self.spawn_part(last);
        }
        while !self.in_flight.is_empty() {
            self.wait_one().await?;
        }
        let mut parts = std::mem::take(&mut self.done);
        parts.sort_by_key(|p| p.part_number());
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| classify(&self.location(), "CompleteMultipartUpload", &self.key, e))?;
        Ok(())
    }

    async fn abort(mut self: Box<Self>) -> Result<(), StoreError> {
        self.in_flight.abort_all();
        while self.in_flight.join_next().await.is_some() {}
        abort(&self.client, &self.bucket, &self.key, &self.upload_id).await
    }
}

/// AbortMultipartUpload: for an upload of ours, and for a stale one found pending by prune.
pub(super) async fn abort(
    client: &Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
) -> Result<(), StoreError> {
    client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await
        .map_err(|e| classify(&format!("s3://{bucket}"), "AbortMultipartUpload", key, e))?;
    Ok(())
}
