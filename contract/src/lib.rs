//! The contract between the operator and the instance managers (`tusk-instance`), written
//! once: the primary Lease's annotations, the `/status` body, the roles Tusk logs in as and the
//! online upgrade's preflight and both sides' steps. docs/src/design/replication.md explains
//! the protocol; `tests/contracts/instance.json` pins the wire format, and both sides test
//! against it, so an operator and a manager of different releases still understand each other.

pub mod declared;
pub mod lease;
pub mod roles;
pub mod status;
pub mod upgrade;
pub mod upgrade_source;
pub mod upgrade_target;

pub use status::{InstanceStatus, Lsns, PostgresState, Role};

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    const CONTRACT: &str = include_str!("../../tests/contracts/instance.json");

    fn contract() -> Value {
        serde_json::from_str(CONTRACT).expect("tests/contracts/instance.json is JSON")
    }

    #[test]
    fn the_lease_annotations_are_the_contracts() {
        let lease = &contract()["lease"];
        let keys = &lease["annotations"];
        for (name, key) in [
            ("members", lease::MEMBERS),
            ("switchoverTo", lease::SWITCHOVER_TO),
            ("switchoverFrom", lease::SWITCHOVER_FROM),
            ("switchoverStarted", lease::SWITCHOVER_STARTED),
            ("finalLsn", lease::FINAL_LSN),
            ("holderAddress", lease::HOLDER_ADDRESS),
            ("lastFailover", lease::LAST_FAILOVER),
            ("systemIdentifier", lease::SYSTEM_IDENTIFIER),
            ("releaseRequested", lease::RELEASE_REQUESTED),
        ] {
            assert_eq!(keys[name], key, "{name}");
        }
        assert_eq!(
            keys.as_object().map(|k| k.len()),
            Some(9),
            "a key this test does not check"
        );
        assert_eq!(lease["durationSeconds"], lease::DURATION_SECONDS);
        let address = &lease["holderAddress"];
        let (pod, ip) = (address["pod"].as_str(), address["ip"].as_str());
        let value = lease::holder_address(pod.unwrap_or_default(), ip.unwrap_or_default());
        assert_eq!(address["value"], value);
        let members = &lease["members"];
        let parsed = lease::members(members["value"].as_str().unwrap_or_default());
        assert_eq!(members["pods"], serde_json::json!(parsed));
    }

    #[test]
    fn the_status_body_round_trips_as_the_contract_writes_it() {
        let sample = contract()["status"]["replica"].clone();
        let status: InstanceStatus =
            serde_json::from_value(sample.clone()).expect("the sample decodes");
        assert!(status.is_running_replica());
        assert_eq!(status.timeline, Some(2));
        assert_eq!(serde_json::to_value(&status).ok(), Some(sample));
    }

    #[test]
    fn a_replica_whose_server_left_recovery_is_not_promotable() {
        let sample = contract()["status"]["replica"].clone();
        let mut status: InstanceStatus = serde_json::from_value(sample).expect("decodes");
        status.in_recovery = Some(false);
        assert!(!status.is_running_replica());
        status.in_recovery = None;
        assert!(status.is_running_replica(), "a manager that does not say");
    }

    #[test]
    fn the_upgrade_preflight_round_trips_as_the_contract_writes_it() {
        let sample = &contract()["upgradePreflight"];
        assert_eq!(sample["path"], upgrade::PREFLIGHT_PATH);
        let body = sample["body"].clone();
        let preflight: upgrade::UpgradePreflight =
            serde_json::from_value(body.clone()).expect("the sample decodes");
        assert_eq!(preflight.refusals().len(), 3);
        assert_eq!(serde_json::to_value(&preflight).ok(), Some(body));
    }

    #[test]
    fn the_upgrade_source_steps_round_trip_as_the_contract_writes_them() {
        let sample = &contract()["upgradeSource"];
        let paths = &sample["paths"];
        assert_eq!(paths["publish"], upgrade_source::PUBLISH_PATH);
        assert_eq!(paths["freeze"], upgrade_source::FREEZE_PATH);
        assert_eq!(paths["confirmed"], upgrade_source::CONFIRMED_PATH);
        assert_eq!(paths["thaw"], upgrade_source::THAW_PATH);
        assert_eq!(paths["unpublish"], upgrade_source::UNPUBLISH_PATH);
        let published: upgrade_source::Published =
            serde_json::from_value(sample["published"].clone()).expect("published decodes");
        assert_eq!(published.databases[0].slot, "tusk_upgrade_16384");
        assert_eq!(
            serde_json::to_value(&published).ok().as_ref(),
            Some(&sample["published"])
        );
        let frozen: upgrade_source::Frozen =
            serde_json::from_value(sample["frozen"].clone()).expect("frozen decodes");
        let request: upgrade_source::ConfirmRequest =
            serde_json::from_value(sample["confirmRequest"].clone()).expect("request decodes");
        assert_eq!(frozen.lsn, request.lsn);
        let confirmation: upgrade_source::Confirmation =
            serde_json::from_value(sample["confirmation"].clone()).expect("answer decodes");
        assert!(!confirmation.confirmed());
        assert_eq!(
            serde_json::to_value(&confirmation).ok().as_ref(),
            Some(&sample["confirmation"])
        );
        let unpublish: upgrade_source::UnpublishRequest =
            serde_json::from_value(sample["unpublishRequest"].clone()).expect("request decodes");
        assert_eq!(unpublish.subscriber.as_deref(), Some("7438201947391834112"));
        assert_eq!(
            serde_json::to_value(&unpublish).ok().as_ref(),
            Some(&sample["unpublishRequest"])
        );
        // An operator that names no subscriber sends `null` or nothing: both read as none.
        let none: Option<upgrade_source::UnpublishRequest> =
            serde_json::from_str("null").expect("null decodes");
        assert!(none.and_then(|r| r.subscriber).is_none());
    }

    #[test]
    fn the_upgrade_target_steps_round_trip_as_the_contract_writes_them() {
        let sample = &contract()["upgradeTarget"];
        let paths = &sample["paths"];
        assert_eq!(paths["copy"], upgrade_target::COPY_PATH);
        assert_eq!(paths["progress"], upgrade_target::PROGRESS_PATH);
        assert_eq!(paths["finish"], upgrade_target::FINISH_PATH);
        for (key, done) in [("copying", false), ("following", true)] {
            let progress: upgrade_target::CopyProgress =
                serde_json::from_value(sample[key].clone()).expect("progress decodes");
            assert_eq!(progress.synchronized(), done, "{key}");
            assert_eq!(
                serde_json::to_value(&progress).ok().as_ref(),
                Some(&sample[key])
            );
        }
        let request: upgrade_target::CopyRequest =
            serde_json::from_value(sample["copyRequest"].clone()).expect("request decodes");
        assert_eq!(request.databases[0].name, "app");
        let finished: upgrade_target::Finished =
            serde_json::from_value(sample["finished"].clone()).expect("finished decodes");
        assert_eq!(finished.sequences, 3);
    }

    #[test]
    fn a_role_from_a_newer_manager_is_unknown_not_an_error() {
        let body = serde_json::json!({"pod": "demo-1", "role": "archiving", "postgres": "running"});
        let status: InstanceStatus = serde_json::from_value(body).expect("decodes");
        assert_eq!(status.role, Role::Unknown);
        assert!(!status.is_running_replica());
    }
}
