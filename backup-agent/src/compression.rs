//! Compression codecs for stored dumps, as async stream adapters. The [`Compression`] choice
//! itself is recorded in the manifest, so it lives in the store crate.

use std::pin::Pin;

use async_compression::tokio::bufread::{GzipDecoder, GzipEncoder, ZstdDecoder, ZstdEncoder};
pub use backup_store::compression::Compression;
use tokio::io::{AsyncBufRead, AsyncRead};

pub type BoxRead = Pin<Box<dyn AsyncRead + Send>>;

/// The codec of each [`Compression`].
pub trait Codec {
    fn encode<R: AsyncBufRead + Send + 'static>(self, input: R) -> BoxRead;
    fn decode<R: AsyncBufRead + Send + 'static>(self, input: R) -> BoxRead;
}

impl Codec for Compression {
    fn encode<R: AsyncBufRead + Send + 'static>(self, input: R) -> BoxRead {
        match self {
            // Level 3 (zstd's default) keeps up with pg_dump on one core.
            Compression::Zstd => Box::pin(ZstdEncoder::new(input)),
            Compression::Gzip => Box::pin(GzipEncoder::with_quality(
                input,
                async_compression::Level::Fastest,
            )),
            Compression::None => Box::pin(input),
        }
    }

    fn decode<R: AsyncBufRead + Send + 'static>(self, input: R) -> BoxRead {
        match self {
            Compression::Zstd => Box::pin(ZstdDecoder::new(input)),
            Compression::Gzip => Box::pin(GzipDecoder::new(input)),
            Compression::None => Box::pin(input),
        }
    }
}
