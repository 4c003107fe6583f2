//! The old primary's steps of an online upgrade, which the operator asks of that primary's
//! instance manager (docs/src/design/major-upgrades.md, "Online, step by step"): the manager
//! runs them as the superuser on its local socket, so the superuser never crosses the network.
//! Each is a `POST` with the status token, idempotent, and answered only by the manager that
//! holds the Lease and runs a primary (`409` otherwise).

use serde::{Deserialize, Serialize};

/// Makes the upgrade role (certificate only), a publication of every table in every database,
/// and the guard that refuses DDL while the copy runs. Answers [`Published`].
pub const PUBLISH_PATH: &str = "/upgrade/publish";
/// Makes the server read-only, ends every client session and answers [`Frozen`]: the write gap
/// starts.
pub const FREEZE_PATH: &str = "/upgrade/freeze";
/// Body [`ConfirmRequest`]; answers [`Confirmation`].
pub const CONFIRMED_PATH: &str = "/upgrade/confirmed";
/// Undoes the freeze: an upgrade cancelled before its cut-over.
pub const THAW_PATH: &str = "/upgrade/thaw";
/// Removes the publications, the slots the subscriptions left, the DDL guard and the role.
/// Body [`UnpublishRequest`] (or none).
pub const UNPUBLISH_PATH: &str = "/upgrade/unpublish";

/// What a DDL statement on the old primary is told while the copy runs.
pub const DDL_REFUSED: &str =
    "a major-version upgrade is copying this database: schema changes wait until it ends";

/// The databases published.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    pub databases: Vec<PublishedDatabase>,
}

/// One published database, and the replication slot its subscription must use (slot names are
/// the whole server's, so each carries the database's OID).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedDatabase {
    pub name: String,
    pub oid: u32,
    pub owner: String,
    pub slot: String,
}

/// What an unpublish removes beyond the upgrade's own slots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnpublishRequest {
    /// The new side's system identifier: the table synchronisation slots its subscriptions
    /// made (`pg_<subscription>_sync_<table>_<system identifier>`) are dropped too. A copy
    /// cancelled while tables were still being synchronised leaves them when the new side is
    /// deleted without dropping its subscriptions, and an inactive slot keeps WAL for ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscriber: Option<String>,
}

/// The final WAL position of the frozen primary: what every subscription must confirm.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frozen {
    pub lsn: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmRequest {
    pub lsn: String,
}

/// The slots of the published databases not yet confirmed past the position (a slot its
/// subscription has not made yet counts as behind); empty: the new side has every write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Confirmation {
    pub lsn: String,
    #[serde(default)]
    pub behind: Vec<String>,
}

impl Confirmation {
    pub fn confirmed(&self) -> bool {
        self.behind.is_empty()
    }
}
