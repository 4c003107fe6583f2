//! The record of the last handover, kept on the Lease beside the holder it names. The status's
//! `lastFailover` is written at the end of the reconcile that handed over; when that write is
//! lost (a later step failed) or refused (the reconcile started from a stale copy), the next
//! reconcile that reads the Lease adopts the record from it, with its Event.

use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;

use crate::crd::{Failover, PostgreSQLStatus};
use crate::resources::LAST_FAILOVER_ANNOTATION;

/// Puts `record` on `lease`, which is about to be written with `record.to` as its holder.
pub fn record_on(lease: &mut Lease, record: &Failover) {
    if let Ok(json) = serde_json::to_string(record) {
        lease
            .annotations_mut()
            .insert(LAST_FAILOVER_ANNOTATION.to_owned(), json);
    }
}

/// The Lease's record of how its holder got it, when the status has not recorded it yet.
pub fn unrecorded(lease: &Lease, status: Option<&PostgreSQLStatus>) -> Option<Failover> {
    let record: Failover =
        serde_json::from_str(lease.annotations().get(LAST_FAILOVER_ANNOTATION)?).ok()?;
    let holder = lease.spec.as_ref()?.holder_identity.as_deref()?;
    let recorded = status.and_then(|s| s.last_failover.as_ref());
    (record.to == holder && recorded != Some(&record)).then_some(record)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn failover(to: &str, at: &str) -> Failover {
        Failover {
            from: "demo-0".into(),
            to: to.into(),
            reason: "PrimaryLost".into(),
            at: Time(at.parse().expect("a timestamp")),
            seconds: Some(6.2),
        }
    }

    fn lease_held_by(holder: &str, record: Option<&Failover>) -> Lease {
        let mut lease = Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        if let Some(record) = record {
            record_on(&mut lease, record);
        }
        lease
    }

    fn status_with(record: Option<Failover>) -> PostgreSQLStatus {
        PostgreSQLStatus {
            last_failover: record,
            ..PostgreSQLStatus::default()
        }
    }

    #[test]
    fn a_handover_missing_from_the_status_is_adopted_from_the_lease() {
        let record = failover("demo-1", "2026-11-24T10:00:00Z");
        let lease = lease_held_by("demo-1", Some(&record));
        assert_eq!(unrecorded(&lease, None), Some(record.clone()));
        let older = status_with(Some(failover("demo-2", "2026-11-20T10:00:00Z")));
        assert_eq!(unrecorded(&lease, Some(&older)), Some(record.clone()));
        let recorded = status_with(Some(record));
        assert_eq!(unrecorded(&lease, Some(&recorded)), None, "recorded once");
    }

    #[test]
    fn a_record_that_does_not_name_the_holder_is_not_adopted() {
        // The Lease went back to the old primary (an aborted switchover), or carries no record.
        let record = failover("demo-1", "2026-11-24T10:00:00Z");
        assert_eq!(
            unrecorded(&lease_held_by("demo-0", Some(&record)), None),
            None
        );
        assert_eq!(unrecorded(&lease_held_by("demo-1", None), None), None);
        let mut garbled = lease_held_by("demo-1", None);
        garbled
            .annotations_mut()
            .insert(LAST_FAILOVER_ANNOTATION.into(), "{not json".into());
        assert_eq!(unrecorded(&garbled, None), None);
    }
}
