//! Where a cluster's Ready waited after its pod's ([`super::ready_lag`], taken apart) from the
//! API server's audit log, which e2e/local/up.sh keeps of every status write of pods and
//! StatefulSets and of the operator's. Per cluster, from its latest-ready pod's Ready stamp:
//! the first write of that pod's status from a second before the stamp on (kwok's patch landing:
//! it stamps when it renders, at one-second resolution); then, each from that write, the first
//! write of the StatefulSet's status (kube-controller-manager counting the pod) and the
//! operator's first status write of the cluster.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::Result;

/// One cluster's latest-ready pod and its Ready stamp, in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadyPod {
    pub namespace: String,
    pub cluster: String,
    pub pod: String,
    pub ready: i64,
}

/// The waits of every cluster whose pod and operator writes were found, in seconds, each
/// sorted (the StatefulSet's where one was written after the pod's).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadyWaits {
    pod_status: Vec<f64>,
    statefulset_status: Vec<f64>,
    operator: Vec<f64>,
}

/// Successful status writes by object (resource, namespace, name), their times sorted.
type StatusWrites = HashMap<(String, String, String), Vec<f64>>;

impl ReadyWaits {
    pub fn read(audit_log: &Path, pods: &[ReadyPod]) -> Result<Self> {
        let mut writes = StatusWrites::new();
        crate::audit::for_each_since(audit_log, 0, |event| {
            if let Some((key, at)) = status_write(event) {
                writes.entry(key).or_default().push(at);
            }
        })?;
        for times in writes.values_mut() {
            times.sort_by(f64::total_cmp);
        }
        Ok(Self::of(&writes, pods))
    }

    fn of(writes: &StatusWrites, pods: &[ReadyPod]) -> Self {
        let first_after = |resource: &str, ns: &str, name: &str, from: f64| {
            let key = (resource.to_owned(), ns.to_owned(), name.to_owned());
            (writes.get(&key)?.iter()).copied().find(|t| *t >= from)
        };
        let mut waits = Self::default();
        for p in pods {
            let stamp = p.ready as f64;
            let ns = p.namespace.as_str();
            let Some(pod) = first_after("pods", ns, &p.pod, stamp - 1.0) else {
                continue;
            };
            let Some(operator) = first_after("postgresqls", ns, &p.cluster, pod) else {
                continue;
            };
            waits.pod_status.push(pod - stamp);
            waits.operator.push(operator - pod);
            if let Some(sts) = first_after("statefulsets", ns, &p.cluster, pod) {
                waits.statefulset_status.push(sts - pod);
            }
        }
        for v in [
            &mut waits.pod_status,
            &mut waits.statefulset_status,
            &mut waits.operator,
        ] {
            v.sort_by(f64::total_cmp);
        }
        waits
    }
}

/// A successful `update`/`patch` of a status subresource: its object and time (seconds).
fn status_write(event: &serde_json::Value) -> Option<((String, String, String), f64)> {
    let text = |p: &str| event.pointer(p).and_then(|v| v.as_str());
    if !matches!(text("/verb")?, "update" | "patch") || text("/objectRef/subresource")? != "status"
    {
        return None;
    }
    let code = event
        .pointer("/responseStatus/code")
        .and_then(|v| v.as_i64());
    if code.is_none_or(|c| c >= 300) {
        return None;
    }
    let at: Time = serde_json::from_value(event.pointer("/stageTimestamp")?.clone()).ok()?;
    let key = (
        text("/objectRef/resource")?.to_owned(),
        text("/objectRef/namespace")?.to_owned(),
        text("/objectRef/name")?.to_owned(),
    );
    Some((key, at.0.as_millisecond() as f64 / 1000.0))
}

/// Nearest-rank quantile `q` of sorted `values`.
fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let n = values.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n.max(1));
    values.get(rank - 1).copied()
}

impl fmt::Display for ReadyWaits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator.is_empty() {
            return f.write_str("no cluster with every write in the audit log");
        }
        let stage = |v: &[f64]| {
            let q = |x| quantile(v, x).unwrap_or_default();
            format!("{:.1} / {:.1} / {:.1} s", q(0.5), q(0.9), q(1.0))
        };
        write!(
            f,
            "pod's status written {}; from there the operator's status write {}, the \
             StatefulSet's status {} (p50 / p90 / max, {} clusters)",
            stage(&self.pod_status),
            stage(&self.operator),
            stage(&self.statefulset_status),
            self.operator.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(resource: &str, name: &str, at: &str, code: i64) -> serde_json::Value {
        serde_json::json!({
            "verb": "patch", "stageTimestamp": at, "responseStatus": {"code": code},
            "objectRef": {"resource": resource, "namespace": "ns", "name": name,
                          "subresource": "status"},
        })
    }

    #[test]
    fn the_waits_are_counted_from_the_pods_status_write() {
        let mut writes = StatusWrites::new();
        for e in [
            event("pods", "a-0", "2026-12-07T10:00:00.500000Z", 200),
            event("pods", "a-0", "2026-12-07T10:00:03.000000Z", 200),
            event("statefulsets", "a", "2026-12-07T10:00:00.200000Z", 200),
            event("statefulsets", "a", "2026-12-07T10:00:10.500000Z", 200),
            event("postgresqls", "a", "2026-12-07T10:00:11.000000Z", 409),
            event("postgresqls", "a", "2026-12-07T10:00:11.500000Z", 200),
        ] {
            // A refused write (the 409) is no status written.
            if let Some((key, at)) = status_write(&e) {
                writes.entry(key).or_default().push(at);
            }
        }
        let stamp = Time(
            "2026-12-07T10:00:01Z"
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let pods = [ReadyPod {
            namespace: "ns".into(),
            cluster: "a".into(),
            pod: "a-0".into(),
            ready: stamp.0.as_second(),
        }];
        let waits = ReadyWaits::of(&writes, &pods);
        assert_eq!(waits.pod_status, [-0.5]);
        assert_eq!(waits.statefulset_status, [10.0]);
        assert_eq!(waits.operator, [11.0], "the refused write is not counted");
        assert!(waits.to_string().ends_with("(p50 / p90 / max, 1 clusters)"));
    }
}
