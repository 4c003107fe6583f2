//! The compression a backup's files are stored with, as recorded in its manifest. The codecs
//! themselves are the agent's: only it reads or writes dump data.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Zstd,
    Gzip,
    None,
}

impl Compression {
    /// File extension appended to stored objects.
    pub fn extension(self) -> &'static str {
        match self {
            Compression::Zstd => ".zst",
            Compression::Gzip => ".gz",
            Compression::None => "",
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
