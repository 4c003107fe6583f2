//! `spec.restore.target`: where a point-in-time restore stops (issue 27).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// At most one of `time`, `lsn`, `xid` and `name`; none: the end of the archive. Recovery stops
/// just after the target (PostgreSQL's `recovery_target_inclusive`) and promotes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("[has(self.time), has(self.lsn), has(self.xid), has(self.name)].filter(x, x).size() <= 1").message("spec.restore.target takes at most one of time, lsn, xid and name ({} replays to the end of the archive)"))]
pub struct RestoreTarget {
    /// RFC 3339 with an offset, e.g. `2026-11-28T10:00:00Z`: every transaction committed by
    /// then, none after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$')").message("spec.restore.target.time must be an RFC 3339 time with an offset, e.g. 2026-11-28T10:00:00Z"))]
    pub time: Option<String>,
    /// A WAL position, `X/Y` (as `pg_current_wal_lsn()` prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 17))]
    #[x_kube(validation = Rule::new("self.matches('^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$')").message("spec.restore.target.lsn must be a WAL position X/Y, e.g. 0/3000060"))]
    pub lsn: Option<String>,
    /// A transaction ID: recovery stops after it commits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20))]
    #[x_kube(validation = Rule::new("self.matches('^[0-9]{1,20}$')").message("spec.restore.target.xid must be a transaction ID (digits)"))]
    pub xid: Option<String>,
    /// A restore point made with `pg_create_restore_point(name)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub name: Option<String>,
}

impl RestoreTarget {
    /// The manager's variable and value of the target, if any.
    pub fn variable(&self) -> Option<(&'static str, &str)> {
        [
            ("TUSK_RESTORE_TARGET_TIME", &self.time),
            ("TUSK_RESTORE_TARGET_LSN", &self.lsn),
            ("TUSK_RESTORE_TARGET_XID", &self.xid),
            ("TUSK_RESTORE_TARGET_NAME", &self.name),
        ]
        .into_iter()
        .find_map(|(var, value)| Some((var, value.as_deref()?)))
    }
}
