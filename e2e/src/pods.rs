//! Real pods (a kubelet and a container runtime, not kwok): a database pod's container state
//! and commands run inside it. Scenarios that need them skip elsewhere.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;

use crate::kubectl::kubectl;
use crate::wait::{Check, until};
use crate::{Context, Ctx, Level, Result, absent};

/// The database container of every Tusk pod.
pub const POSTGRES: &str = "postgres";

/// What the suite reads of a pod: its uid, whether it is Ready, and its database container.
pub struct PodState {
    pub uid: String,
    pub ready: bool,
    pub postgres: Option<ContainerStatus>,
}

impl PodState {
    fn of(pod: &Pod) -> Self {
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let postgres = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.iter().find(|c| c.name == POSTGRES).cloned());
        PodState {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            ready,
            postgres,
        }
    }

    /// How often the kubelet restarted the database container.
    pub fn restarts(&self) -> i32 {
        self.postgres.as_ref().map_or(0, |c| c.restart_count)
    }

    /// The reason the database container last ended (e.g. `Error`), if it ever did.
    pub fn last_termination(&self) -> Option<String> {
        let state = self.postgres.as_ref()?.last_state.as_ref()?;
        let terminated = state.terminated.as_ref()?;
        Some(format!(
            "exit {} ({})",
            terminated.exit_code,
            terminated.reason.as_deref().unwrap_or("no reason")
        ))
    }
}

impl std::fmt::Display for PodState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "uid {} ready {} restarts {} last {}",
            self.uid,
            self.ready,
            self.restarts(),
            self.last_termination().unwrap_or_else(|| "-".into())
        )
    }
}

impl Ctx {
    /// The scenario is about real containers (probes, restarts, signals).
    pub fn require_real_pods(&self) -> Result {
        if self.platform.runs_pods() {
            Ok(())
        } else {
            Err(absent(
                Level::Pods,
                "real pods (E2E_PLATFORM=node or in-cluster: e2e/local/node-run.sh, kind)",
            ))
        }
    }

    pub async fn pod_state(&self, pod: &str) -> Result<PodState> {
        let pod = Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .get(pod)
            .await
            .context(format!("pod {}/{pod}", self.ns))?;
        Ok(PodState::of(&pod))
    }

    /// Waits until the pod's state satisfies `want`, described as `what`.
    pub async fn wait_pod(
        &self,
        pod: &str,
        what: &str,
        want: impl Fn(&PodState) -> bool,
    ) -> Result<PodState> {
        until(
            format!("pod {}/{pod}: {what}", self.ns),
            self.timeout(),
            || async {
                let state = self.pod_state(pod).await?;
                Ok(if want(&state) {
                    Check::Done(state)
                } else {
                    Check::Pending(state.to_string())
                })
            },
        )
        .await
    }

    /// Runs `command` in the pod's database container; its stdout.
    pub async fn exec_postgres(&self, pod: &str, command: &[&str]) -> Result<String> {
        let mut args = vec!["-n", &self.ns, "exec", pod, "-c", POSTGRES, "--"];
        args.extend_from_slice(command);
        kubectl(&args).await
    }

    /// `sql` run by psql in the pod's database container with `conninfo`, the password given
    /// through stdin (never on a command line): its output, or (inner Err) psql's error.
    pub async fn psql_in_pod(
        &self,
        pod: &str,
        conninfo: &str,
        password: &str,
        sql: &str,
    ) -> Result<std::result::Result<String, String>> {
        use tokio::io::AsyncWriteExt;
        let script =
            "read -r PGPASSWORD && export PGPASSWORD && exec psql -X -A -t -c \"$1\" \"$0\"";
        let kubectl = std::env::var("TUSK_KUBECTL_BIN").unwrap_or_else(|_| "kubectl".into());
        let mut child = tokio::process::Command::new(kubectl)
            .args(["-n", &self.ns, "exec", "-i", pod, "-c", POSTGRES, "--"])
            .args(["sh", "-c", script, conninfo, sql])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("running kubectl exec")?;
        let mut stdin = child.stdin.take().context("kubectl's stdin")?;
        stdin.write_all(format!("{password}\n").as_bytes()).await?;
        drop(stdin);
        let out = child.wait_with_output().await?;
        Ok(if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        })
    }
}
