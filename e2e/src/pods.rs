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
}
