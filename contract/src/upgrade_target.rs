//! The new major's side of an online upgrade, which the operator asks of the new instance set's
//! primary manager (docs/src/design/major-upgrades.md): copy the old primary's roles and
//! schema and subscribe to its publications, report how far the copy is, and at the cut-over
//! carry the sequences and detach. The manager reaches the old primary as `tusk_upgrade` with
//! the certificate the operator adds to the cluster's server Secret (`upgrade.crt`,
//! `upgrade.key`) for the upgrade's time. Status token required; only the new set's Lease
//! holder running a primary answers (`409` otherwise).

use serde::{Deserialize, Serialize};

use crate::upgrade_source::PublishedDatabase;

/// Body [`CopyRequest`]: starts the copy in the background, or lets a running or finished one
/// be (`202`).
pub const COPY_PATH: &str = "/upgrade/copy";
/// `GET`: answers [`CopyProgress`].
pub const PROGRESS_PATH: &str = "/upgrade/progress";
/// Body [`CopyRequest`]: the sequences carried, every subscription detached; answers
/// [`Finished`]. Asked once the old primary is frozen and has confirmed the final position.
pub const FINISH_PATH: &str = "/upgrade/finish";

/// Where the old primary is, and what it published (`upgrade_source::Published`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyRequest {
    /// A name its server certificate carries (the cluster's `-rw` Service).
    pub host: String,
    pub port: u16,
    pub databases: Vec<PublishedDatabase>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CopyState {
    /// Nothing asked yet.
    #[default]
    Idle,
    /// Roles, schema and subscriptions being made.
    Copying,
    /// Every database subscribed: the rows are being copied, then followed.
    Following,
    Failed,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyProgress {
    pub state: CopyState,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default)]
    pub databases: Vec<DatabaseProgress>,
}

/// A subscribed database: its tables, and how many have been copied and now follow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseProgress {
    pub name: String,
    pub tables: u64,
    pub synchronized: u64,
}

impl CopyProgress {
    /// Every table of every database copied: the cut-over may start.
    pub fn synchronized(&self) -> bool {
        self.state == CopyState::Following
            && self.databases.iter().all(|d| d.synchronized == d.tables)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    /// How many sequences were set to the old side's values.
    pub sequences: usize,
}
