//! A scenario's context and [`with_temp_ns`], which gives each scenario fresh namespaces,
//! reports PASS/SKIP/FAIL with its duration, dumps diagnostics on failure and removes the
//! namespaces afterwards. SKIP only for a level the run does not declare (`crate::Level`), and
//! the summary line names it (`SKIP[pods]`): `tusk-e2e-summary` counts them.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::platform::Platform;
use crate::settings::Settings;
use crate::wait::{Check, until};
use crate::{Context, Failure, Result, diagnostics};

/// The label of every scenario namespace, so that leftovers can be found.
pub const SCENARIO_LABEL: &str = "e2e.tusk.dev/scenario";

#[derive(Clone)]
pub struct Ctx {
    pub client: Client,
    /// The scenario's own namespace.
    pub ns: String,
    pub settings: Arc<Settings>,
    pub platform: Arc<Platform>,
    /// Every namespace of the scenario (the first is `ns`), removed at its end.
    namespaces: Arc<Mutex<Vec<String>>>,
    scenario: &'static str,
}

/// Prints a line of the scenario's progress (shown live with `--nocapture`).
pub fn say(line: impl std::fmt::Display) {
    println!("  {line}");
}

/// Runs `test` in a fresh labelled namespace. On failure (an error or a panic) the diagnostics
/// go to `$E2E_ARTIFACTS/<scenario>.txt` (or a temp dir) and the test panics with the message.
pub async fn with_temp_ns<F, Fut>(scenario: &'static str, test: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = Result> + Send + 'static,
{
    println!("=== {scenario}");
    let started = Instant::now();
    let settings = Arc::new(Settings::from_env());
    let client = Client::try_default()
        .await
        .expect("a client for the cluster KUBECONFIG names");
    let platform = Arc::new(Platform::from_env(client.clone(), &settings));
    let ns = create_namespace(&client, scenario, settings.timeout)
        .await
        .unwrap_or_else(|e| panic!("{scenario}: cannot create its namespace: {e}"));
    let ctx = Ctx {
        client,
        ns,
        settings,
        platform,
        namespaces: Arc::default(),
        scenario,
    };
    ctx.register(&ctx.ns);
    // A task of its own, so that a panic is caught and the namespace still cleaned up.
    let outcome = match tokio::spawn(test(ctx.clone())).await {
        Ok(result) => result,
        Err(join) => Err(Failure::Fail(format!("panicked: {}", panic_message(join)))),
    };
    let took = started.elapsed();
    // A level the run lacks is a SKIP only where the run does not declare it.
    let declared =
        (ctx.settings.levels.clone()).unwrap_or_else(|| ctx.platform.levels(&ctx.settings));
    let outcome = match outcome {
        Err(Failure::Absent(level, reason)) if declared.contains(&level) => Err(Failure::Fail(
            format!("this run declares level {level} (E2E_LEVELS), but: {reason}"),
        )),
        other => other,
    };
    let verdict = match &outcome {
        Ok(()) => "PASS".to_owned(),
        Err(Failure::Absent(level, reason)) => {
            println!("  SKIP: needs {level}: {reason}");
            format!("SKIP[{level}]")
        }
        Err(Failure::Fail(_)) => "FAIL".to_owned(),
    };
    if let Err(Failure::Fail(message)) = &outcome {
        println!("  FAILED: {message}");
        match diagnostics::dump(&ctx, scenario, message).await {
            Ok(path) => println!("--- diagnostics of {scenario}: {}", path.display()),
            Err(e) => println!("--- diagnostics of {scenario} could not be written: {e}"),
        }
        // A scenario that failed between killing and restarting the operator must not take
        // the rest of the suite down with it (a no-op when it runs).
        if let Err(e) = ctx.platform.operator_start(ctx.timeout()).await {
            println!("  (operator not restarted: {e})");
        }
    }
    ctx.drop_namespaces().await;
    ctx.record(&verdict, took);
    if let Err(Failure::Fail(message)) = outcome {
        panic!("{scenario} failed: {message}");
    }
}

fn panic_message(join: tokio::task::JoinError) -> String {
    match join.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into()),
        Err(join) => join.to_string(),
    }
}

impl Ctx {
    /// Another fresh namespace for this scenario (e.g. to prove isolation between two).
    pub async fn extra_namespace(&self) -> Result<String> {
        let ns = create_namespace(&self.client, self.scenario, self.settings.timeout).await?;
        self.register(&ns);
        Ok(ns)
    }

    pub fn namespaces(&self) -> Vec<String> {
        self.namespaces
            .lock()
            .map(|n| n.clone())
            .unwrap_or_default()
    }

    pub fn timeout(&self) -> Duration {
        self.settings.timeout
    }

    fn register(&self, ns: &str) {
        if let Ok(mut namespaces) = self.namespaces.lock() {
            namespaces.push(ns.to_string());
        }
    }

    /// Not waited for: the next scenario does not depend on it (zero_writes_at_rest waits for
    /// Terminating namespaces itself).
    async fn drop_namespaces(&self) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        for ns in self.namespaces() {
            if let Err(e) = api.delete(&ns, &DeleteParams::default()).await {
                println!("  (namespace {ns} not deleted: {e})");
            }
        }
    }

    fn record(&self, verdict: &str, took: Duration) {
        let line = format!("{verdict}  {:>4}s  {}", took.as_secs(), self.scenario);
        println!("{line}");
        if let Some(path) = &self.settings.summary {
            use std::io::Write;
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| writeln!(f, "{line}"));
            if let Err(e) = appended {
                println!("  (E2E_SUMMARY {} not written: {e})", path.display());
            }
        }
    }
}

/// `e2e-<start of the scenario's name>-<suffix>`: unique per run, so that bucket prefixes
/// (`<path>/<ns>/<cluster>/`) and backup ids never collide with an earlier run's. Short: the L4
/// job runner's PostgreSQL sockets live under a path made of it (107 bytes at most). The full
/// name is in the annotation `e2e.tusk.dev/scenario-name`.
async fn create_namespace(client: &Client, scenario: &str, timeout: Duration) -> Result<String> {
    let base: String = scenario.replace('_', "-").chars().take(13).collect();
    let name = format!("e2e-{}-{}", base.trim_end_matches('-'), unique_suffix());
    let api: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([(SCENARIO_LABEL.to_string(), "true".to_string())].into()),
            annotations: Some(
                [(
                    "e2e.tusk.dev/scenario-name".to_string(),
                    scenario.to_string(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    api.create(&PostParams::default(), &namespace)
        .await
        .context(format!("creating namespace {name}"))?;
    // Pods can only be created once the namespace's default ServiceAccount exists.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    until(
        format!("ServiceAccount {name}/default"),
        timeout,
        || async {
            Ok(Check::when(
                accounts.get_opt("default").await?.is_some(),
                "absent",
            ))
        },
    )
    .await?;
    Ok(name)
}

fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    let mut n =
        nanos ^ (u64::from(std::process::id()) << 32) ^ COUNTER.fetch_add(1, Ordering::Relaxed);
    let alphabet = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = String::new();
    for _ in 0..5 {
        out.push(char::from(alphabet[(n % 36) as usize]));
        n /= 36;
    }
    out
}
