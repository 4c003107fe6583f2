//! The Events and metrics of primary changes: every failover (a Warning), a failover that is
//! due but cannot happen, and each switchover's start and end.

use kube::runtime::events::Event;

use super::primary::{PrimaryState, SwitchoverNote};
use super::report::publish;
use crate::crd::PostgreSQL;
use crate::runtime::Context;
use crate::runtime::events::{normal, warning};

/// A Warning for every failover, and one when a failover is due but cannot happen; Events for
/// each switchover's start and end.
pub async fn publish_primary(pg: &PostgreSQL, ctx: &Context, primary: &PrimaryState) {
    match &primary.failover {
        Some(switched) if switched.reason == "Switchover" => {
            ctx.metrics.switched_over();
            let note = format!(
                "switched over from {} to {} in {:.1}s, after {} had replayed the old primary's \
                 final WAL",
                switched.from,
                switched.to,
                switched.seconds.unwrap_or_default(),
                switched.to
            );
            publish(ctx, pg, normal("SwitchedOver", "Switchover", note)).await;
        }
        Some(failover) => {
            ctx.metrics
                .failed_over(failover.seconds.unwrap_or_default());
            let note = format!(
                "primary {} stopped renewing its Lease ({:.1}s); promoted {}, the most advanced replica",
                failover.from,
                failover.seconds.unwrap_or_default(),
                failover.to
            );
            publish(ctx, pg, warning("FailedOver", "Failover", note)).await;
        }
        None => {}
    }
    if let Some(note) = &primary.switchover {
        publish(ctx, pg, switchover_event(note)).await;
    }
    if let Some(pod) = &primary.restarted {
        let note = format!(
            "restarted replica {pod} on the StatefulSet's new revision (replicas first, one at a \
             time; the primary last, after a switchover)"
        );
        publish(ctx, pg, normal("RollingUpdate", "Restart", note)).await;
    }
    if let Some(stuck) = &primary.stuck {
        publish(
            ctx,
            pg,
            warning("FailoverBlocked", "Failover", stuck.clone()),
        )
        .await;
    }
}

fn switchover_event(note: &SwitchoverNote) -> Event {
    match note {
        SwitchoverNote::Started { from, to, why } => normal(
            "SwitchoverStarted",
            "Switchover",
            format!("asked {from} to shut down cleanly and hand the primary role to {to} ({why})"),
        ),
        SwitchoverNote::Blocked(why) => warning("SwitchoverBlocked", "Switchover", why.clone()),
        SwitchoverNote::Rejected(why) => warning("SwitchoverRejected", "Switchover", why.clone()),
        SwitchoverNote::Aborted(why) => warning(
            "SwitchoverAborted",
            "Switchover",
            format!("{why}; the old primary keeps its role"),
        ),
    }
}
