//! What a Job says about its pod, read from its conditions, and why its agent failed, read from
//! the pod's termination message; shared by backups, restores and the cleanup of running backups.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::resources::AGENT_CONTAINER;

/// What a Job reports about its pod.
#[derive(Clone, Debug, PartialEq)]
pub enum JobState {
    Active { started: Option<Time> },
    Succeeded { finished: Option<Time> },
    Failed { message: String },
}

/// The state of a Job from its `Complete`/`Failed` conditions.
pub fn job_state(job: &Job) -> JobState {
    let status = job.status.as_ref();
    let condition = |type_: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_ && c.status == "True"))
    };
    if condition("Complete").is_some() {
        return JobState::Succeeded {
            finished: status.and_then(|s| s.completion_time.clone()),
        };
    }
    if let Some(failed) = condition("Failed") {
        let message = match (&failed.reason, &failed.message) {
            (Some(reason), Some(message)) => format!("{reason}: {message}"),
            (Some(text), None) | (None, Some(text)) => text.clone(),
            (None, None) => "the Job failed".to_owned(),
        };
        return JobState::Failed { message };
    }
    JobState::Active {
        started: status.and_then(|s| s.start_time.clone()),
    }
}

/// The reason Kubernetes gives a Job it stopped at its `activeDeadlineSeconds`.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

/// Whether Kubernetes stopped `job` at its `activeDeadlineSeconds`: it hung or ran too long,
/// which is a different story for the user than a pod that failed.
pub fn deadline_exceeded(job: &Job) -> bool {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|cs| {
        cs.iter().any(|c| {
            c.type_ == "Failed"
                && c.status == "True"
                && c.reason.as_deref() == Some(DEADLINE_EXCEEDED)
        })
    })
}

/// How the backup agent's container of a failed Job ended, from its pod's status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentExit {
    pub exit_code: i32,
    /// The kubelet's reason (`Error`, `OOMKilled`, `DeadlineExceeded`, ...).
    pub reason: Option<String>,
    /// The agent's one-line reason, from its termination message.
    pub message: Option<String>,
}

/// Every termination of the agent container among `pods` (a Job's pods).
fn agent_terminations(pods: &[Pod]) -> impl Iterator<Item = &ContainerStateTerminated> {
    pods.iter()
        .filter_map(|pod| pod.status.as_ref()?.container_statuses.as_ref())
        .flatten()
        .filter(|status| status.name == AGENT_CONTAINER)
        .filter_map(|status| status.state.as_ref()?.terminated.as_ref())
}

/// The whole termination message of the agent's most recent run among `pods`, whatever its exit
/// code: where `verify-restore` leaves its JSON report.
pub fn agent_termination_message(pods: &[Pod]) -> Option<String> {
    agent_terminations(pods)
        .max_by_key(|terminated| terminated.finished_at.as_ref().map(|t| t.0))
        .and_then(|terminated| terminated.message.clone())
}

/// The most recent failed termination of the agent container among `pods` (a Job's pods).
pub fn agent_exit(pods: &[Pod]) -> Option<AgentExit> {
    agent_terminations(pods)
        .filter(|terminated| terminated.exit_code != 0)
        .max_by_key(|terminated| terminated.finished_at.as_ref().map(|t| t.0))
        .map(|terminated| AgentExit {
            exit_code: terminated.exit_code,
            reason: terminated.reason.clone(),
            message: terminated.message.as_deref().and_then(one_line),
        })
}

/// Why a failed Job failed: the agent's own reason when it left one, the Job's otherwise, with
/// the exit code either way.
pub fn failure_message(job_message: &str, exit: Option<&AgentExit>) -> String {
    let Some(exit) = exit else {
        return job_message.to_owned();
    };
    let code = match &exit.reason {
        Some(reason) if reason != "Error" => format!("exit code {}, {reason}", exit.exit_code),
        _ => format!("exit code {}", exit.exit_code),
    };
    match &exit.message {
        Some(message) => format!("{message} ({code})"),
        None => format!("{job_message} ({code})"),
    }
}

/// Reads how the agent of the failed Job `job` ended. Read when the Job has failed: by then the
/// kubelet has written its pod's final status (the Job controller counts it from there).
pub async fn failed_agent(
    client: &Client,
    namespace: &str,
    job: &str,
) -> Result<Option<AgentExit>, kube::Error> {
    Ok(agent_exit(&job_pods(client, namespace, job).await?))
}

/// The pods of Job `job`.
pub async fn job_pods(
    client: &Client,
    namespace: &str,
    job: &str,
) -> Result<Vec<Pod>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("batch.kubernetes.io/job-name={job}");
    Ok(pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// A termination message as one trimmed line of bounded length; `None` when empty. With
/// `FallbackToLogsOnError` it can be a log tail, whose last line says the most.
fn one_line(message: &str) -> Option<String> {
    let line = message
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())?;
    let mut end = line.len().min(MAX_MESSAGE);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Some(line[..end].to_owned())
}

/// Bytes of a termination message kept in a status (the agent writes at most this many).
const MAX_MESSAGE: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(exit_code: i32, finished: i64, message: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("job-{finished}")},
            "status": {"containerStatuses": [{
                "name": AGENT_CONTAINER, "image": "agent", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {
                    "exitCode": exit_code, "reason": if exit_code == 137 { "OOMKilled" } else { "Error" },
                    "message": message,
                    "finishedAt": k8s_openapi::jiff::Timestamp::from_second(finished).map(|t| t.to_string()).unwrap_or_default(),
                }},
            }]},
        }))
        .expect("a valid Pod")
    }

    #[test]
    fn the_latest_failed_agent_container_is_the_reason() {
        let pods = [
            pod(4, 100, Some("object store: access denied")),
            pod(5, 200, Some("integrity check failed: sha256 differs\n")),
            pod(0, 300, Some("ok")),
        ];
        let exit = agent_exit(&pods).expect("a failed container");
        assert_eq!(exit.exit_code, 5);
        assert_eq!(
            exit.message.as_deref(),
            Some("integrity check failed: sha256 differs")
        );
        assert_eq!(agent_exit(&[pod(0, 1, None)]), None);
    }

    #[test]
    fn the_termination_message_of_the_latest_run_is_read_whatever_its_exit_code() {
        let pods = [
            pod(7, 100, Some("{\"phase\":\"Failed\"}")),
            pod(0, 200, Some("{\"phase\":\"Passed\"}")),
        ];
        assert_eq!(
            agent_termination_message(&pods).as_deref(),
            Some("{\"phase\":\"Passed\"}")
        );
        assert_eq!(agent_termination_message(&[]), None);
    }

    #[test]
    fn the_message_names_the_agents_reason_or_the_jobs() {
        let job = "BackoffLimitExceeded: Job has reached the specified backoff limit";
        let told = AgentExit {
            exit_code: 5,
            reason: Some("Error".into()),
            message: Some("integrity check failed: x".into()),
        };
        assert_eq!(
            failure_message(job, Some(&told)),
            "integrity check failed: x (exit code 5)"
        );
        let killed = AgentExit {
            exit_code: 137,
            reason: Some("OOMKilled".into()),
            message: None,
        };
        assert_eq!(
            failure_message(job, Some(&killed)),
            format!("{job} (exit code 137, OOMKilled)")
        );
        assert_eq!(failure_message(job, None), job);
    }

    #[test]
    fn a_log_tail_keeps_its_last_line_and_is_bounded() {
        assert_eq!(one_line("a\nlast line  \n\n").as_deref(), Some("last line"));
        assert_eq!(one_line(" \n"), None);
        assert_eq!(one_line(&"é".repeat(2000)).map(|l| l.len()), Some(1024));
    }
}
