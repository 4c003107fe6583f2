//! The operator as the Deployment `tusk-system/tusk-operator` of deploy/ (kind, a real node):
//! pods really run, so SQL goes through `kubectl exec` into the database pod. On e2e/local's
//! real node (`E2E_PLATFORM=node`) the suite also reads the API server's audit log and reaches
//! the in-cluster MinIO through its Service's cluster IP (kube-proxy routes the host's traffic).

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, LogParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

use super::local::run as run_command;
use crate::audit::{self, Write};
use crate::bucket::Damage;
use crate::wait::{Check, until};
use crate::{Context, Result, bucket};

/// Where the operator runs, and the label of its pods.
pub const NAMESPACE: &str = "tusk-system";
pub const SELECTOR: &str = "app.kubernetes.io/name=tusk-operator";
/// deploy/deployment.yaml's.
const OPERATOR_DEPLOYMENT: &str = "tusk-operator";

pub struct InCluster {
    client: Client,
    /// The local control plane's run directory when the node is e2e/local's own.
    local_node: Option<PathBuf>,
}

/// The in-cluster MinIO of e2e/kind/minio.yaml (namespace and Service `minio`, port 9000).
const MINIO: (&str, &str, u16) = ("minio", "minio", 9000);

impl InCluster {
    pub fn new(client: Client) -> Self {
        InCluster {
            client,
            local_node: None,
        }
    }

    /// e2e/local's control plane (run directory `dir`) with its real node.
    pub fn local_node(client: Client, dir: PathBuf) -> Self {
        InCluster {
            client,
            local_node: Some(dir),
        }
    }

    pub fn is_local_node(&self) -> bool {
        self.local_node.is_some()
    }

    fn audit_log(&self) -> Option<PathBuf> {
        Some(self.local_node.as_ref()?.join("logs/audit.log"))
    }

    pub fn operator_writes_mark(&self) -> Option<Result<u64>> {
        Some(audit::mark(&self.audit_log()?))
    }

    pub fn operator_writes_since(&self, mark: u64) -> Option<Result<Vec<Write>>> {
        Some(audit::writes_since(&self.audit_log()?, mark))
    }

    /// Makes the pod's readiness probe fail (`ready` false) or pass again, for real: in the pod's
    /// network namespace TCP connections to PostgreSQL and to the instance manager's status port
    /// (the kubelet's probes) are refused; `kubectl exec psql` uses the socket and keeps working.
    /// The liveness probe gives a minute before it would restart the container. Root on
    /// e2e/local's node only.
    pub async fn pod_set_ready(&self, ns: &str, pod: &str, ready: bool) -> Result {
        let pod_ip = self.pod_ip(ns, pod).await?;
        let netns = netns_with(&pod_ip).await?;
        for port in ["5432", "8000"] {
            let rule = ["INPUT", "-p", "tcp", "--dport", port, "-j", "REJECT"];
            iptables(&netns, !ready, &rule).await?;
        }
        Ok(())
    }

    /// Freezes every process of the pod's `postgres` container (the instance manager and
    /// PostgreSQL: a hung node, a stopped VM) or thaws them, through the node's containerd
    /// (`ctr tasks pause`/`resume`, the cgroup freezer). Root on e2e/local's node only.
    pub async fn pod_freeze(&self, ns: &str, pod: &str, frozen: bool) -> Result {
        let verb = if frozen { "pause" } else { "resume" };
        match self.ctr_task(ns, pod, &[verb]).await {
            // The kubelet replaced the frozen container (its liveness probe failed): the new
            // one was never frozen.
            Err(e) if !frozen && e.to_string().contains("cannot resume a running process") => {
                Ok(())
            }
            other => other,
        }
    }

    /// SIGSTOP (or SIGCONT) to the init process of the pod's `postgres` container, the instance
    /// manager, alone: sent from the host, as a signal from inside the container could not
    /// reach its PID 1. The postmaster and the manager's watchdog run on.
    pub async fn pod_freeze_manager(&self, ns: &str, pod: &str, frozen: bool) -> Result {
        let signal = if frozen { "SIGSTOP" } else { "SIGCONT" };
        self.ctr_task(ns, pod, &["kill", "--signal", signal]).await
    }

    /// SIGKILL to the init process of the pod's `postgres` container, the instance manager
    /// (PID 1 of its PID namespace): the kernel then kills every other process in it, the
    /// postmaster included — a crash of the whole container. Root on e2e/local's node only.
    pub async fn pod_kill(&self, ns: &str, pod: &str) -> Result {
        self.ctr_task(ns, pod, &["kill", "--signal", "SIGKILL"])
            .await
    }

    /// `ctr tasks VERB... <container id>` on the pod's `postgres` container.
    async fn ctr_task(&self, ns: &str, pod: &str, verb: &[&str]) -> Result {
        let dir = self.local_node.as_ref().context("not e2e/local's node")?;
        let status = Api::<Pod>::namespaced(self.client.clone(), ns)
            .get(pod)
            .await?
            .status
            .unwrap_or_default();
        let id = status
            .container_statuses
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.name == "postgres")
            .and_then(|c| c.container_id)
            .context(format!("pod {ns}/{pod} has no running postgres container"))?;
        let id = id.rsplit("://").next().unwrap_or(&id).to_owned();
        let socket = dir.join("node/containerd/containerd.sock");
        let mut command = tokio::process::Command::new("ctr");
        command
            .arg("--address")
            .arg(&socket)
            .args(["-n", "k8s.io", "tasks"])
            .args(verb)
            .arg(&id);
        run_command(&mut command).await.map(drop)
    }

    /// Cuts the pod off from the API server (`cut` true) or heals it: in the pod's network
    /// namespace, packets to the `kubernetes` Service and to its endpoints are dropped (not
    /// refused: a partition answers nothing). Everything else, its peers and the kubelet's
    /// probes included, still flows. Root on e2e/local's node only.
    pub async fn pod_cut_from_api_server(&self, ns: &str, pod: &str, cut: bool) -> Result {
        let mut targets = Vec::new();
        let service = Api::<Service>::namespaced(self.client.clone(), "default")
            .get("kubernetes")
            .await?;
        let ip = service.spec.and_then(|s| s.cluster_ip);
        targets.push((ip.context("Service default/kubernetes has no IP")?, 443));
        let slice = Api::<EndpointSlice>::namespaced(self.client.clone(), "default")
            .get("kubernetes")
            .await?;
        let port = slice
            .ports
            .as_ref()
            .and_then(|p| p.first()?.port)
            .unwrap_or(443);
        for endpoint in slice.endpoints.iter().flatten() {
            targets.extend(endpoint.addresses.iter().map(|a| (a.clone(), port)));
        }
        let netns = netns_with(&self.pod_ip(ns, pod).await?).await?;
        for (ip, port) in targets {
            let port = port.to_string();
            let rule = [
                "OUTPUT", "-d", &ip, "-p", "tcp", "--dport", &port, "-j", "DROP",
            ];
            iptables(&netns, cut, &rule).await?;
        }
        Ok(())
    }

    /// Cuts the pod off from the pods `others` (every packet between them dropped, both
    /// ways), or heals it. The API server, the host's clients and the kubelet still reach it.
    pub async fn pod_cut_from_pods(
        &self,
        ns: &str,
        pod: &str,
        others: &[&str],
        cut: bool,
    ) -> Result {
        let netns = netns_with(&self.pod_ip(ns, pod).await?).await?;
        for other in others {
            let ip = self.pod_ip(ns, other).await?;
            iptables(&netns, cut, &["INPUT", "-s", &ip, "-j", "DROP"]).await?;
            iptables(&netns, cut, &["OUTPUT", "-d", &ip, "-j", "DROP"]).await?;
        }
        Ok(())
    }

    async fn pod_ip(&self, ns: &str, pod: &str) -> Result<String> {
        Api::<Pod>::namespaced(self.client.clone(), ns)
            .get(pod)
            .await?
            .status
            .and_then(|s| s.pod_ip)
            .context(format!("pod {ns}/{pod} has no IP"))
    }

    /// Every key under `prefix`, through the MinIO Service's cluster IP.
    pub async fn bucket_keys(&self, prefix: &str) -> Result<Vec<String>> {
        bucket::keys(&self.minio_endpoint().await?, prefix).await
    }

    /// Damages object `key`, through the MinIO Service's cluster IP.
    pub async fn bucket_damage(&self, key: &str, damage: Damage<'_>) -> Result {
        bucket::damage(&self.minio_endpoint().await?, key, damage).await
    }

    /// The in-cluster MinIO as this host reaches it (the node's cluster IPs route here).
    async fn minio_endpoint(&self) -> Result<String> {
        let (ns, name, port) = MINIO;
        let service = Api::<Service>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
            .context(format!("Service {ns}/{name}"))?;
        let ip = service
            .spec
            .and_then(|s| s.cluster_ip)
            .context(format!("Service {ns}/{name} has no cluster IP"))?;
        Ok(format!("http://{ip}:{port}"))
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    pub async fn operator_kill(&self) -> Result {
        let pods = self.pods();
        for pod in pods.list(&ListParams::default().labels(SELECTOR)).await? {
            pods.delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
                .await?;
        }
        Ok(())
    }

    /// Scales the operator's Deployment to none and waits until its pods are gone: the
    /// operator stopped for as long as a scenario needs, not restarted as after a kill.
    pub async fn operator_stop(&self, timeout: std::time::Duration) -> Result {
        self.operator_replicas(0).await?;
        let pods = self.pods();
        until("the operator's pods gone", timeout, || async {
            let list = pods.list(&ListParams::default().labels(SELECTOR)).await?;
            let names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
            Ok(Check::when(names.is_empty(), names.join(", ")))
        })
        .await
    }

    async fn operator_replicas(&self, replicas: i32) -> Result {
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), NAMESPACE);
        let patch = serde_json::json!({"spec": {"replicas": replicas}});
        deployments
            .patch(
                OPERATOR_DEPLOYMENT,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .context(format!(
                "scaling Deployment {OPERATOR_DEPLOYMENT} to {replicas}"
            ))?;
        Ok(())
    }

    /// Brings the operator back (its Deployment at one replica, after a kill or a stop) and
    /// waits until a pod of it is Ready.
    pub async fn operator_start(&self, timeout: std::time::Duration) -> Result {
        self.operator_replicas(1).await?;
        let pods = self.pods();
        until("a new operator pod to be Ready", timeout, || async {
            let list = pods.list(&ListParams::default().labels(SELECTOR)).await?;
            let ready = list.items.iter().any(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            });
            Ok(Check::when(
                ready,
                format!("{} operator pod(s), none Ready", list.items.len()),
            ))
        })
        .await
    }

    pub async fn operator_logs(&self) -> Result<String> {
        let pods = self.pods();
        let mut out = String::new();
        for pod in pods.list(&ListParams::default().labels(SELECTOR)).await? {
            let params = LogParams {
                tail_lines: Some(300),
                ..LogParams::default()
            };
            out.push_str(&pods.logs(&pod.name_any(), &params).await?);
        }
        Ok(out)
    }

    pub async fn operator_metrics(&self) -> Result<String> {
        let request = http_get(
            "/api/v1/namespaces/tusk-system/services/tusk-operator-metrics:http/proxy/metrics",
        )?;
        Ok(self.client.request_text(request).await?)
    }

    pub async fn db_sql(&self, ns: &str, cluster: &str, db: &str, sql: &str) -> Result<String> {
        pod_psql(ns, cluster, &["-U", "postgres", "-d", db], sql).await
    }

    /// The application's own connection URI (over the cluster's Service, `verify-full`), from
    /// inside the pod, trusting the `ca.crt` of the same Secret: what an application does.
    pub async fn app_sql(&self, ns: &str, cluster: &str, sql: &str) -> Result<String> {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client.clone(), ns);
        let secret = secrets.get(&format!("{cluster}-app")).await?;
        let value = |key: &str| -> Result<String> {
            let bytes = (secret.data.as_ref())
                .and_then(|d| d.get(key).cloned())
                .context(format!("no {key} in {ns}/{cluster}-app"))?;
            String::from_utf8(bytes.0).context(key.to_owned())
        };
        let (uri, ca) = (value("uri")?, value("ca.crt")?);
        // The CA is public; written where the pod may write, then psql trusts that file only.
        let trust = "printf '%s' \"$1\" > /tmp/app-ca.crt && shift && \
                     PGSSLROOTCERT=/tmp/app-ca.crt exec psql \"$@\"";
        let mut args = vec!["sh", "-c", trust, "sh", &ca, &uri];
        args.extend(tusk_testkit::PSQL_SCRIPT);
        args.extend(["-c", sql]);
        pod_exec(ns, cluster, &args).await
    }
}

/// psql in the cluster's first pod (its `postgres` container): unaligned, tuples only, stopping at
/// the first error. `target` names the connection (`-U`/`-d` or a URI).
async fn pod_psql(ns: &str, cluster: &str, target: &[&str], sql: &str) -> Result<String> {
    let mut args = vec!["psql"];
    args.extend_from_slice(target);
    args.extend(tusk_testkit::PSQL_SCRIPT);
    args.extend(["-c", sql]);
    pod_exec(ns, cluster, &args).await
}

/// `command` in the cluster's first pod (its `postgres` container).
async fn pod_exec(ns: &str, cluster: &str, command: &[&str]) -> Result<String> {
    let pod = format!("{cluster}-0");
    let mut args = vec!["-n", ns, "exec", &pod, "-c", "postgres", "--"];
    args.extend_from_slice(command);
    run_command(tokio::process::Command::new("kubectl").args(args)).await
}

/// Inserts (`add`) or deletes iptables rule `rule` in network namespace `netns`.
async fn iptables(netns: &str, add: bool, rule: &[&str]) -> Result {
    let mut command = tokio::process::Command::new("ip");
    command.args([
        "netns",
        "exec",
        netns,
        "iptables",
        if add { "-I" } else { "-D" },
    ]);
    run_command(command.args(rule)).await.map(drop)
}

/// The network namespace (under /var/run/netns, where the CNI plugins put them) holding `ip`.
async fn netns_with(ip: &str) -> Result<String> {
    let entries = std::fs::read_dir("/var/run/netns").context("/var/run/netns")?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let mut command = tokio::process::Command::new("ip");
        let addresses = run_command(command.args(["-n", &name, "-o", "-4", "addr", "show"])).await;
        if addresses.is_ok_and(|a| a.contains(&format!(" {ip}/"))) {
            return Ok(name);
        }
    }
    crate::fail!("no network namespace holds {ip}")
}

fn http_get(path: &str) -> Result<http::Request<Vec<u8>>> {
    http::Request::get(path).body(Vec::new()).context("request")
}
