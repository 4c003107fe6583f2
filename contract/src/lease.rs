//! The primary Lease `<cluster>-primary`: its holder is the only instance that may run as
//! primary. Besides the holder, the operator and the holder exchange these annotations.

/// How long a holder may go without renewing before the operator hands the Lease on. The
/// holder fences itself 2 s earlier (its renew deadline), so the two never overlap. Both sides
/// use this compiled-in value, never one read from the Lease (which any member may write).
pub const DURATION_SECONDS: u32 = 6;

/// The cluster's member pods, comma-separated, written by the operator. The primary keeps a
/// replication slot for each of the others.
pub const MEMBERS: &str = "tusk.dev/instances";
/// Written by the operator: the holder is asked to hand over to this member. The same key on
/// the PostgreSQL resource is a user's request for a switchover.
pub const SWITCHOVER_TO: &str = "tusk.dev/switchover-to";
/// Written by the operator: the holder when the switchover started.
pub const SWITCHOVER_FROM: &str = "tusk.dev/switchover-from";
/// Written by the operator: when the switchover started (RFC 3339), for its timeout.
pub const SWITCHOVER_STARTED: &str = "tusk.dev/switchover-started";
/// Written by the holder when it releases the Lease in a switchover: the location of its final
/// (shutdown) checkpoint, which the target must have replayed past before promotion.
pub const FINAL_LSN: &str = "tusk.dev/final-lsn";
/// `<pod>=<pod IP>` of the holder, written by the holder on renew and by the operator when it
/// hands the Lease over. Standbys dial that IP: a recreated primary is found at its new
/// address at once, while its DNS name can still give the old one.
pub const HOLDER_ADDRESS: &str = "tusk.dev/holder-address";
/// The last handover (failover or switchover) as the JSON of the status's `lastFailover`,
/// written by the operator in the same write that changes the holder.
pub const LAST_FAILOVER: &str = "tusk.dev/last-failover";

/// The database system identifier of the cluster, written by the first holder once its
/// database exists and never changed after: the durable record that the cluster has
/// bootstrapped. A holder without data never runs initdb once it is there, a member whose data
/// has another identifier never runs or streams, and the operator fails over only once it is
/// there (or the cluster served before it was recorded).
pub const SYSTEM_IDENTIFIER: &str = "tusk.dev/system-identifier";
/// Written by the operator: the holder named here stops renewing (and fences) so that the
/// Lease expires and is handed on. Asked when the holder renews but has not served for too
/// long (PostgreSQL that never starts, a disk full): renewing alone must not hold the cluster.
pub const RELEASE_REQUESTED: &str = "tusk.dev/release-requested";

/// Every annotation of a switchover, removed when it ends.
pub const SWITCHOVER_ANNOTATIONS: [&str; 4] = [
    SWITCHOVER_TO,
    SWITCHOVER_FROM,
    SWITCHOVER_STARTED,
    FINAL_LSN,
];

/// The [`HOLDER_ADDRESS`] value naming `pod` at `ip`.
pub fn holder_address(pod: &str, ip: &str) -> String {
    format!("{pod}={ip}")
}

/// The IP in a [`HOLDER_ADDRESS`] value, if it names `holder`: an address left from an
/// earlier holder is never used for the current one.
pub fn address_of(value: &str, holder: &str) -> Option<String> {
    let (pod, ip) = value.split_once('=')?;
    (pod.trim() == holder && !ip.trim().is_empty()).then(|| ip.trim().to_string())
}

/// The members in a [`MEMBERS`] value.
pub fn members(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_address_names_its_pod() {
        let value = holder_address("demo-1", "10.0.0.12");
        assert_eq!(value, "demo-1=10.0.0.12");
        assert_eq!(address_of(&value, "demo-1").as_deref(), Some("10.0.0.12"));
        assert_eq!(address_of(&value, "demo-0"), None, "another holder's");
        assert_eq!(address_of("garbage", "demo-1"), None);
        assert_eq!(address_of("demo-1=", "demo-1"), None);
    }

    #[test]
    fn members_ignore_blanks() {
        assert_eq!(members("demo-0, demo-1,,"), ["demo-0", "demo-1"]);
        assert!(members("").is_empty());
    }
}
