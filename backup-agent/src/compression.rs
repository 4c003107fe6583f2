//! Compression codecs for stored dumps, as async stream adapters.

use std::pin::Pin;

use async_compression::tokio::bufread::{GzipDecoder, GzipEncoder, ZstdDecoder, ZstdEncoder};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncRead};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Zstd,
    Gzip,
    None,
}

pub type BoxRead = Pin<Box<dyn AsyncRead + Send>>;

impl Compression {
    /// File extension appended to stored objects.
    pub fn extension(self) -> &'static str {
        match self {
            Compression::Zstd => ".zst",
            Compression::Gzip => ".gz",
            Compression::None => "",
        }
    }

    pub fn encode<R: AsyncBufRead + Send + 'static>(self, input: R) -> BoxRead {
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

    pub fn decode<R: AsyncBufRead + Send + 'static>(self, input: R) -> BoxRead {
        match self {
            Compression::Zstd => Box::pin(ZstdDecoder::new(input)),
            Compression::Gzip => Box::pin(GzipDecoder::new(input)),
            Compression::None => Box::pin(input),
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
            Compression::None => "none",
        })
    }
}
