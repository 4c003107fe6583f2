//! `kubectl tusk report NAME [-o DIR|FILE.tar.gz]`: a support bundle. One YAML file per kind
//! (the PostgreSQL, its Backups and every labelled child, Secrets redacted by
//! [`redact::sanitize`]), the Events about them, the status screen, and the logs of the
//! instance pods and of the operator's pods. Logs that cannot be read are noted, not fatal.

pub mod redact;

use std::path::{Path, PathBuf};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, LogParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cluster::{backups_of, children_selector, events_about, get_postgresql, list};
use crate::error::{Error, Result};

/// Where the operator runs, to collect its logs.
pub struct OperatorPods {
    pub namespace: String,
    pub selector: String,
}

/// Lines of each log kept in the bundle.
const LOG_LINES: i64 = 2000;

/// Writes the bundle of `namespace/name` to `output` (a directory, or a `.tar.gz`/`.tgz` file)
/// and returns the files written, relative to the bundle's root.
pub async fn run(
    client: &Client,
    namespace: &str,
    name: &str,
    operator: &OperatorPods,
    output: &Path,
) -> Result<Vec<String>> {
    let archive = output
        .to_str()
        .is_some_and(|p| p.ends_with(".tar.gz") || p.ends_with(".tgz"));
    let staging = tempfile::tempdir().map_err(Error::io("creating a temporary directory"))?;
    let root = if archive {
        staging.path().join(format!("tusk-report-{name}"))
    } else {
        output.to_path_buf()
    };
    let mut bundle = Bundle::create(root)?;
    collect(client, namespace, name, operator, &mut bundle).await?;
    if archive {
        tar(staging.path(), &format!("tusk-report-{name}"), output)?;
    }
    Ok(bundle.written)
}

async fn collect(
    client: &Client,
    namespace: &str,
    name: &str,
    operator: &OperatorPods,
    bundle: &mut Bundle,
) -> Result<()> {
    let children = children_selector(name);
    let pg = get_postgresql(client, namespace, name).await?;
    let backups = backups_of(client, namespace, name).await?;
    bundle.yaml("postgresql.yaml", &[&pg])?;
    bundle.yaml("backups.yaml", &backups)?;
    let child = Children {
        client,
        namespace,
        selector: &children,
    };
    bundle.yaml("statefulsets.yaml", &child.list::<StatefulSet>().await?)?;
    bundle.yaml("services.yaml", &child.list::<Service>().await?)?;
    bundle.yaml("configmaps.yaml", &child.list::<ConfigMap>().await?)?;
    bundle.yaml("cronjobs.yaml", &child.list::<CronJob>().await?)?;
    bundle.yaml("jobs.yaml", &child.list::<Job>().await?)?;
    bundle.yaml("pvcs.yaml", &child.list::<PersistentVolumeClaim>().await?)?;
    bundle.yaml("secrets.yaml", &child.list::<Secret>().await?)?;
    bundle.yaml(
        "events.yaml",
        &events_about(client, namespace, name, &backups).await?,
    )?;
    let pods = child.list::<Pod>().await?;
    bundle.yaml("pods.yaml", &pods)?;
    let fetched = crate::status::fetch(client, namespace, name).await?;
    let screen = crate::status::render::render(&crate::status::summary::summarize(
        &fetched,
        Timestamp::now(),
    ));
    bundle.text("status.txt", &screen)?;
    for pod in &pods {
        pod_logs(client, namespace, pod, "logs", bundle).await?;
    }
    let params = ListParams::default().labels(&operator.selector);
    match list::<Pod>(client, &operator.namespace, &params).await {
        Ok(operators) if operators.is_empty() => bundle.text(
            "operator/README.txt",
            &format!(
                "no pods matched {} in namespace {}; pass --operator-namespace/--operator-selector\n",
                operator.selector, operator.namespace
            ),
        )?,
        Ok(operators) => {
            for pod in &operators {
                pod_logs(client, &operator.namespace, pod, "operator", bundle).await?;
            }
        }
        Err(e) => bundle.text("operator/README.txt", &format!("operator pods not listed: {e}\n"))?,
    }
    Ok(())
}

/// The cluster's labelled children, listed one kind at a time.
struct Children<'a> {
    client: &'a Client,
    namespace: &'a str,
    selector: &'a ListParams,
}

impl Children<'_> {
    async fn list<K>(&self) -> Result<Vec<K>>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        list::<K>(self.client, self.namespace, self.selector).await
    }
}

/// The logs of every container of `pod` into `dir/<pod>_<container>.log`.
async fn pod_logs(
    client: &Client,
    namespace: &str,
    pod: &Pod,
    dir: &str,
    bundle: &mut Bundle,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let containers = pod
        .spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for container in containers {
        let params = LogParams {
            container: Some(container.clone()),
            tail_lines: Some(LOG_LINES),
            timestamps: true,
            ..LogParams::default()
        };
        let text = match api.logs(&pod.name_any(), &params).await {
            Ok(text) => text,
            Err(e) => format!("logs unavailable: {e}\n"),
        };
        bundle.text(&format!("{dir}/{}_{container}.log", pod.name_any()), &text)?;
    }
    Ok(())
}

/// The bundle's directory and what has been written into it.
struct Bundle {
    root: PathBuf,
    written: Vec<String>,
}

impl Bundle {
    fn create(root: PathBuf) -> Result<Self> {
        std::fs::create_dir_all(&root)
            .map_err(Error::io(format!("creating {}", root.display())))?;
        Ok(Self {
            root,
            written: Vec::new(),
        })
    }

    /// `objects` sanitized, as one multi-document YAML file.
    fn yaml<T: Serialize>(&mut self, file: &str, objects: &[T]) -> Result<()> {
        let mut text = String::new();
        for object in objects {
            let value = serde_json::to_value(object).map_err(Error::encode(file))?;
            let yaml =
                serde_saphyr::to_string(&redact::sanitize(value)).map_err(Error::encode(file))?;
            text.push_str("---\n");
            text.push_str(&yaml);
        }
        self.text(file, &text)
    }

    fn text(&mut self, file: &str, text: &str) -> Result<()> {
        let path = self.root.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(Error::io(format!("creating {}", parent.display())))?;
        }
        std::fs::write(&path, text).map_err(Error::io(format!("writing {}", path.display())))?;
        self.written.push(file.to_owned());
        Ok(())
    }
}

/// `tar -czf output -C dir name`: the system tar, as no tar crate is in the workspace.
fn tar(dir: &Path, name: &str, output: &Path) -> Result<()> {
    let status = std::process::Command::new("tar")
        .arg("-czf")
        .arg(output)
        .arg("-C")
        .arg(dir)
        .arg(name)
        .status()
        .map_err(Error::io("running tar"))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "tar -czf {} exited with {status}",
            output.display()
        )))
    }
}
