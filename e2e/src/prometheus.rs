//! A real Prometheus (built by scripts/testbin.sh) as a process on loopback: it scrapes one
//! target as job `tusk-operator` every second and evaluates the shipped alert rules every
//! second; the scenario reads it through the HTTP API (instant queries, alerts, rules).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::process::{Child, Command};

use crate::testbin::{repo, tool};
use crate::wait::{Check, until};
use crate::{Context, Result, fail, metrics};

/// The alert rules the chart ships (and promtool unit-tests).
pub const RULES: &str = "deploy/helm/tusk/files/prometheus-rules.yaml";
/// The Grafana dashboard the chart ships.
pub const DASHBOARD: &str = "deploy/helm/tusk/files/grafana-dashboard.json";

pub struct Prometheus {
    child: Child,
    port: u16,
    dir: PathBuf,
}

/// One series of an instant query's answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Sample {
    pub metric: BTreeMap<String, String>,
    /// `[unix time, "value"]`.
    pub value: (f64, String),
}

/// An active alert: pending while its `for` runs, then firing.
#[derive(Debug, Clone, Deserialize)]
pub struct Alert {
    pub labels: BTreeMap<String, String>,
    pub state: String,
}

/// A loaded rule and how its last evaluation went.
#[derive(Debug, Clone, Deserialize)]
pub struct Rule {
    pub name: String,
    pub query: String,
    pub health: String,
    #[serde(rename = "lastError", default)]
    pub last_error: String,
}

#[derive(Deserialize)]
struct Answer<T> {
    status: String,
    data: Option<T>,
    #[serde(default)]
    error: String,
}

#[derive(Deserialize)]
struct Vector {
    result: Vec<Sample>,
}

#[derive(Deserialize)]
struct Alerts {
    alerts: Vec<Alert>,
}

#[derive(Deserialize)]
struct Groups {
    groups: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    rules: Vec<Rule>,
}

impl Prometheus {
    /// Starts Prometheus in a new directory under `parent`, scraping `target` (`host:port`),
    /// and waits until it is ready.
    pub async fn start(parent: &Path, target: &str) -> Result<Self> {
        let bin = tool("prometheus", "TUSK_PROMETHEUS_BIN").await?;
        let dir = parent.join(format!("prometheus-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).context(format!("creating {}", dir.display()))?;
        // A port the kernel just handed out; Prometheus binds it a moment later.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("finding a free port")?
            .port();
        write_config(&dir, target)?;
        let log = std::fs::File::create(dir.join("prometheus.log")).context("prometheus.log")?;
        let child = Command::new(bin)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // `/-/reload` after the target changes.
            .arg("--web.enable-lifecycle")
            .stdout(log.try_clone().context("prometheus.log")?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting prometheus")?;
        let prometheus = Prometheus { child, port, dir };
        until("Prometheus to be ready", READY, || async {
            Ok(match prometheus.get("/-/ready").await {
                Ok(_) => Check::Done(()),
                Err(e) => Check::Pending(e.to_string()),
            })
        })
        .await?;
        Ok(prometheus)
    }

    /// Scrapes `target` from now on (rewrites the config and reloads it).
    pub async fn retarget(&self, target: &str) -> Result {
        write_config(&self.dir, target)?;
        metrics::post(("127.0.0.1", self.port), "/-/reload")
            .await
            .map(drop)
    }

    /// The series `expr` returns now.
    pub async fn query(&self, expr: &str) -> Result<Vec<Sample>> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", expr)
            .finish();
        let vector: Vector = self.api(&format!("/api/v1/query?{query}")).await?;
        Ok(vector.result)
    }

    /// The alerts pending or firing now.
    pub async fn alerts(&self) -> Result<Vec<Alert>> {
        Ok(self.api::<Alerts>("/api/v1/alerts").await?.alerts)
    }

    /// Every rule loaded from the rule files.
    pub async fn rules(&self) -> Result<Vec<Rule>> {
        let groups: Groups = self.api("/api/v1/rules").await?;
        Ok(groups.groups.into_iter().flat_map(|g| g.rules).collect())
    }

    /// Prometheus's own log (diagnostics of a failed scenario).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    async fn get(&self, path: &str) -> Result<String> {
        metrics::get(("127.0.0.1", self.port), path).await
    }

    async fn api<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let body = self.get(path).await?;
        let answer: Answer<T> =
            serde_json::from_str(&body).context(format!("GET {path}: {body:.300}"))?;
        match answer.data {
            Some(data) if answer.status == "success" => Ok(data),
            _ => fail!("GET {path}: {} {}", answer.status, answer.error),
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // kill_on_drop stops the process; its directory holds only this run's TSDB and log.
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How long a fresh Prometheus may take to open its TSDB and serve.
const READY: std::time::Duration = std::time::Duration::from_secs(60);

/// One job named as the rules and the chart's ServiceMonitor name it, the shipped rules, and
/// one-second intervals so that the scenario waits seconds, not minutes.
fn write_config(dir: &Path, target: &str) -> Result {
    let rules = repo().join(RULES);
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{rules:?}]
scrape_configs:
  - job_name: tusk-operator
    static_configs: [{{targets: [{target:?}]}}]
",
        rules = rules.display().to_string(),
    );
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, config).context(format!("writing {}", file.display()))
}

/// Every `expr` of the shipped dashboard's panels, with its panel's title.
pub fn dashboard_queries() -> Result<Vec<(String, String)>> {
    let file = repo().join(DASHBOARD);
    let text = std::fs::read_to_string(&file).context(format!("reading {}", file.display()))?;
    let dashboard: serde_json::Value =
        serde_json::from_str(&text).context(format!("parsing {}", file.display()))?;
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        let title = panel["title"].as_str().unwrap_or_default();
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                queries.push((title.to_owned(), expr.to_owned()));
            }
        }
    }
    if queries.is_empty() {
        fail!("{} has no panel queries", file.display());
    }
    Ok(queries)
}
