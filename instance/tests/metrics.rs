//! `GET /metrics` against real servers: the primary reports each standby streaming and its lag,
//! the replica its role, timeline and WAL receiver.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn the_primary_and_the_replica_expose_their_replication_state() {
    let cluster = streaming_pair();
    let (primary, replica) = (&cluster.members[0], &cluster.members[1]);
    let streaming = "tusk_instance_standby_streaming{pod=\"demo-0\",standby=\"demo-1\"} 1";
    wait_for(
        "demo-0 to report demo-1 streaming",
        Duration::from_secs(30),
        || {
            http_get(primary.status_port, "/metrics")
                .is_some_and(|m| m.lines().any(|l| l == streaming))
        },
    );
    let metrics = http_get(primary.status_port, "/metrics").unwrap_or_default();
    for line in [
        "tusk_instance_role{pod=\"demo-0\",role=\"primary\"} 1",
        "tusk_instance_timeline{pod=\"demo-0\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing in\n{metrics}"
        );
    }
    let metrics = http_get(replica.status_port, "/metrics").unwrap_or_default();
    for line in [
        "tusk_instance_role{pod=\"demo-1\",role=\"replica\"} 1",
        "tusk_instance_wal_receiver_streaming{pod=\"demo-1\"} 1",
        "tusk_instance_up{pod=\"demo-1\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing in\n{metrics}"
        );
    }
}
