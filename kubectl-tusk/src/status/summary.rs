//! The status screen as data: [`summarize`] turns the fetched objects into a [`Summary`] at a
//! given moment. Pure, so every line of `kubectl tusk status` is unit-tested on plain values;
//! `-o json` prints the same Summary.

use k8s_openapi::api::core::v1::{Event, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde::Serialize;
use tusk::clusters::backup_schedule::freshness::next_run;
use tusk::crd::conditions::BACKUP_VERIFIED;
use tusk::crd::{Backup, PostgreSQL};

use crate::cluster::event_time;

/// How many Backups and Warning Events the screen lists.
pub const RECENT: usize = 5;

/// Everything `status` fetched about one cluster.
pub struct Fetched {
    pub pg: PostgreSQL,
    pub pods: Vec<Pod>,
    /// The pooler's pods (`spec.pooler`), if any.
    pub pooler_pods: Vec<Pod>,
    pub services: Vec<Service>,
    /// Newest first.
    pub backups: Vec<Backup>,
    /// Oldest first.
    pub events: Vec<Event>,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub name: String,
    pub namespace: String,
    /// The major serving (`status.version`; the spec's before the operator recorded it).
    pub version: u32,
    /// A major-version upgrade in progress (`status.upgrade`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeLine>,
    pub phase: String,
    pub ready_instances: i32,
    pub instances: i32,
    pub conditions: Vec<ConditionLine>,
    pub pods: Vec<Instance>,
    pub endpoints: Vec<Endpoint>,
    /// The pooler's pods, their role the pool mode (`spec.pooler`); empty without one.
    pub pooler: Vec<Instance>,
    /// `spec.roles` and `spec.databases` as the primary's manager last kept them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<Declared>,
    pub backups: Vec<BackupLine>,
    pub schedule: Option<Schedule>,
    pub verification: Option<VerificationLine>,
    pub warnings: Vec<Warning>,
}

/// A major-version upgrade as one line: from, to, the phase and for how long.
#[derive(Serialize, Debug, PartialEq)]
pub struct UpgradeLine {
    pub from: i32,
    pub to: i32,
    pub phase: String,
    pub age: String,
    pub message: String,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct ConditionLine {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub age: String,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Instance {
    pub name: String,
    /// `primary` for the Lease holder (`status.currentPrimary`), which `-rw` selects; `replica`
    /// otherwise.
    pub role: String,
    pub ready: bool,
    pub phase: String,
    pub restarts: i32,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Endpoint {
    pub service: String,
    /// `host:port` inside the cluster.
    pub address: String,
    pub purpose: String,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Declared {
    pub kind: String,
    pub name: String,
    pub state: String,
    pub message: Option<String>,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupLine {
    pub name: String,
    pub phase: String,
    pub size_bytes: Option<i64>,
    pub age: String,
    pub verification: Option<String>,
    pub error: Option<String>,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub schedule: String,
    pub suspended: bool,
    pub next_run: Option<String>,
    pub next_run_in: Option<String>,
    pub last_successful: Option<String>,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VerificationLine {
    /// The newest Backup whose verification passed.
    pub backup: Option<String>,
    pub verified_at: Option<String>,
    /// The `BackupVerified` condition, as `status (reason): message`.
    pub condition: Option<String>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Warning {
    pub age: String,
    pub object: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// The screen for `fetched` as seen at `now`.
pub fn summarize(fetched: &Fetched, now: Timestamp) -> Summary {
    let pg = &fetched.pg;
    let status = pg.status.clone().unwrap_or_default();
    let age = |t: Timestamp| crate::format::age(t, now);
    Summary {
        name: pg.name_any(),
        namespace: pg.namespace().unwrap_or_default(),
        version: (status.version)
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or_else(|| pg.spec.version.major()),
        upgrade: status.upgrade.as_ref().map(|u| UpgradeLine {
            from: u.from,
            to: u.to,
            phase: format!("{:?}", u.phase),
            age: (u.phase_since.as_ref()).map_or_else(String::new, |t| age(t.0)),
            message: u.message.clone().unwrap_or_default(),
        }),
        phase: status
            .phase
            .map_or_else(|| "Unknown".to_owned(), |p| format!("{p:?}")),
        ready_instances: status.ready_instances,
        instances: pg.spec.instances,
        conditions: status
            .conditions
            .iter()
            .map(|c| condition_line(c, now))
            .collect(),
        pods: instances(&primary_of(pg), &fetched.pods),
        endpoints: fetched.services.iter().map(endpoint).collect(),
        pooler: pg.spec.pooler.as_ref().map_or_else(Vec::new, |pooler| {
            let mode = pooler.pool_mode.as_str();
            let read_only = |pod: &Pod| {
                pod.labels()
                    .get("app.kubernetes.io/component")
                    .map(String::as_str)
                    == Some("pooler-ro")
            };
            let replicas: Vec<String> = (fetched.pooler_pods.iter())
                .filter(|pod| read_only(pod))
                .map(|pod| pod.name_any())
                .collect();
            instances("", &fetched.pooler_pods)
                .into_iter()
                .map(|pod| {
                    let to = match replicas.contains(&pod.name) {
                        true => "the replicas",
                        false => "the primary",
                    };
                    let role = format!("PgBouncer, {mode} mode, to {to}");
                    Instance { role, ..pod }
                })
                .collect()
        }),
        declared: status
            .declared
            .iter()
            .map(|o| Declared {
                kind: o.kind.clone(),
                name: o.name.clone(),
                state: o.state.clone(),
                message: o.message.clone(),
            })
            .collect(),
        backups: fetched
            .backups
            .iter()
            .take(RECENT)
            .map(|b| backup_line(b, now))
            .collect(),
        schedule: pg.spec.backup.as_ref().map(|policy| {
            let next = (!policy.suspend)
                .then(|| next_run(&policy.schedule, now))
                .flatten();
            Schedule {
                schedule: policy.schedule.clone(),
                suspended: policy.suspend,
                next_run: next.map(|t| t.to_string()),
                next_run_in: next.map(|t| crate::format::until(t, now)),
                last_successful: status
                    .last_successful_backup
                    .as_ref()
                    .map(|b| format!("{} ({} ago)", b.name, age(b.completed_at.0))),
            }
        }),
        verification: verification(pg),
        warnings: warnings(&fetched.events, now),
    }
}

fn condition_line(c: &Condition, now: Timestamp) -> ConditionLine {
    ConditionLine {
        type_: c.type_.clone(),
        status: c.status.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        age: crate::format::age(c.last_transition_time.0, now),
    }
}

/// The pod holding the primary Lease (`status.currentPrimary`), or ordinal 0 before the
/// operator reported one.
pub fn primary_of(pg: &PostgreSQL) -> String {
    pg.status
        .as_ref()
        .and_then(|s| s.current_primary.clone())
        .unwrap_or_else(|| format!("{}-0", pg.name_any()))
}

fn instances(primary: &str, pods: &[Pod]) -> Vec<Instance> {
    let mut out: Vec<Instance> = pods
        .iter()
        .map(|pod| {
            let status = pod.status.clone().unwrap_or_default();
            let ready = status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            Instance {
                name: pod.name_any(),
                role: if pod.name_any() == primary {
                    "primary"
                } else {
                    "replica"
                }
                .to_owned(),
                ready,
                phase: status.phase.unwrap_or_else(|| "Unknown".to_owned()),
                restarts: status
                    .container_statuses
                    .unwrap_or_default()
                    .iter()
                    .map(|c| c.restart_count)
                    .sum(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn endpoint(service: &Service) -> Endpoint {
    let name = service.name_any();
    let namespace = service.namespace().unwrap_or_default();
    let port = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .map_or(5432, |p| p.port);
    let purpose = if name.ends_with("-pooler-rw") {
        "read-write through the pooler (PgBouncer)"
    } else if name.ends_with("-pooler-ro") {
        "read-only through the pooler (PgBouncer, to the replicas)"
    } else if name.ends_with("-rw") {
        "read-write (primary)"
    } else if name.ends_with("-ro") {
        "read-only (replicas)"
    } else if name.ends_with("-r") {
        "any instance"
    } else if name.ends_with("-hl") {
        "headless (each pod by name)"
    } else {
        "other"
    };
    Endpoint {
        address: format!("{name}.{namespace}.svc:{port}"),
        service: name,
        purpose: purpose.to_owned(),
    }
}

fn backup_line(backup: &Backup, now: Timestamp) -> BackupLine {
    let status = backup.status.clone().unwrap_or_default();
    let created = backup.creation_timestamp().map(|t| t.0);
    BackupLine {
        name: backup.name_any(),
        phase: format!("{:?}", backup.phase()),
        size_bytes: status.size_bytes,
        age: created.map_or_else(|| "?".to_owned(), |t| crate::format::age(t, now)),
        verification: status
            .verification
            .and_then(|v| v.phase)
            .map(|p| format!("{p:?}")),
        error: status.error,
    }
}

fn verification(pg: &PostgreSQL) -> Option<VerificationLine> {
    let status = pg.status.as_ref()?;
    let verified = status.last_verified_backup.as_ref();
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == BACKUP_VERIFIED)
        .map(|c| format!("{} ({}): {}", c.status, c.reason, c.message));
    if verified.is_none() && condition.is_none() {
        return None;
    }
    Some(VerificationLine {
        backup: verified.map(|v| v.name.clone()),
        verified_at: verified.map(|v| v.verified_at.0.to_string()),
        condition,
    })
}

/// The newest [`RECENT`] distinct warnings, oldest first. Events that repeat one warning (same
/// object, reason and message: the scheduler retrying, say) are one line with their counts summed.
fn warnings(events: &[Event], now: Timestamp) -> Vec<Warning> {
    let mut out: Vec<Warning> = Vec::new();
    for e in events.iter().rev() {
        if e.type_.as_deref() != Some("Warning") {
            continue;
        }
        let object = format!(
            "{}/{}",
            e.involved_object.kind.as_deref().unwrap_or("?"),
            e.involved_object.name.as_deref().unwrap_or("?")
        );
        let reason = e.reason.clone().unwrap_or_default();
        let message = e.message.clone().unwrap_or_default();
        let count = e
            .series
            .as_ref()
            .and_then(|s| s.count)
            .or(e.count)
            .unwrap_or(1);
        if let Some(seen) = out
            .iter_mut()
            .find(|w| w.object == object && w.reason == reason && w.message == message)
        {
            seen.count += count;
            continue;
        }
        if out.len() == RECENT {
            continue;
        }
        out.push(Warning {
            age: event_time(e).map_or_else(|| "?".to_owned(), |t| crate::format::age(t, now)),
            object,
            reason,
            message,
            count,
        });
    }
    out.reverse();
    out
}
