//! Real pods (e2e/local/node-run.sh, kind): what kwok's imitation cannot show. PostgreSQL in the
//! container decides readiness through the kubelet's probes, a crash inside the pod and a deleted
//! pod heal on the same volume, and clients reach the database through the `-rw` Service. Each
//! scenario skips where pods do not really run.

use k8s_openapi::api::core::v1::{Event, Service};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use tusk_e2e::manifests::cluster;
use tusk_e2e::pods::PodState;
use tusk_e2e::{Ctx, Result, ensure, say, scenario};

/// A row the healing scenarios check after the restart.
const KEEP: &str = "CREATE TABLE IF NOT EXISTS heal (v int); INSERT INTO heal VALUES (42)";
const KEPT: &str = "SELECT sum(v) FROM heal";

/// Cluster `name` Ready with the `KEEP` row written; its pod as it is before the fault.
async fn cluster_with_row(ctx: &Ctx, name: &str) -> Result<PodState> {
    ctx.apply(&cluster(name, None)).await?;
    ctx.wait_ready(&[name]).await?;
    ctx.db_sql(name, "postgres", KEEP).await?;
    ctx.pod_state(&format!("{name}-0")).await
}

/// After the fault: the cluster Ready again and the `KEEP` row still there.
async fn row_kept(ctx: &Ctx, name: &str) -> Result {
    ctx.wait_ready(&[name]).await?;
    let kept = ctx.db_sql(name, "postgres", KEPT).await?;
    ensure!(
        kept.trim() == "42",
        "{name}'s data after the fault: {kept:?}"
    );
    Ok(())
}

/// The kubelet's readiness probe made the pod Ready, and the application role logs in over the
/// network through the `-rw` Service's DNS name (SCRAM, pg_hba.conf from the ConfigMap), with
/// `-rw` the cluster's only client Service (`spec.services.disabled`, as
/// docs/src/cluster/connect.md shows it).
#[scenario]
async fn probes_and_rw_service(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let only_rw = cluster("probed", None).replace(
        "storage: {size: 1Gi}",
        "storage: {size: 1Gi}\n  services:\n    disabled: [ro, r]      # -rw and -hl only",
    );
    ctx.apply(&only_rw).await?;
    ctx.wait_ready(&["probed"]).await?;
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    for absent in ["probed-ro", "probed-r"] {
        ensure!(
            services.get_opt(absent).await?.is_none(),
            "{absent} exists, though spec.services disables it"
        );
    }
    let pod = ctx.pod_state("probed-0").await?;
    ensure!(pod.ready, "Ready cluster, pod not Ready: {pod}");
    let who = ctx
        .platform
        .app_sql(
            &ctx.ns,
            "probed",
            "SELECT current_user || ' ' || inet_server_addr()",
        )
        .await?;
    ensure!(
        who.starts_with("app "),
        "logged in as {who:?}, not the app role"
    );
    say(format!(
        "pod Ready through its probe; app role over probed-rw: {}",
        who.trim()
    ));
    Ok(())
}

/// A postgresql.conf PostgreSQL refuses: the container fails, and neither the pod nor the
/// cluster ever reports Ready (kwok made exactly this cluster Ready).
#[scenario]
async fn broken_config_never_ready(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let broken = cluster("broken", None).replace(
        "storage: {size: 1Gi}",
        "storage: {size: 1Gi}\n  parameters: {shared_buffers: not-a-size}",
    );
    ctx.apply(&broken).await?;
    // Evidence, not a wait: PostgreSQL started and refused its configuration.
    let pod = ctx
        .wait_pod("broken-0", "the postgres container failed", |p| {
            p.last_termination().is_some()
        })
        .await?;
    ensure!(
        !pod.ready,
        "broken-0 is Ready with an invalid postgresql.conf: {pod}"
    );
    let ready = ctx.ready_status_in(&ctx.ns, "broken").await?;
    ensure!(ready != "True", "postgresql/broken reports Ready={ready}");
    say(format!("broken-0 failed ({pod}); Ready={ready}"));
    Ok(())
}

/// An immediate shutdown of PostgreSQL inside the pod: the instance manager (the container's
/// PID 1, still holding the primary Lease) starts it again in place, without a container
/// restart; the cluster is Ready again and the data is still there.
#[scenario]
async fn postgres_killed_in_pod(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let before = cluster_with_row(&ctx, "crash").await?.restarts();
    const STARTED: &str = "SELECT pg_postmaster_start_time()";
    let started = ctx.db_sql("crash", "postgres", STARTED).await?;
    // The exit status is the server's end, not a result: ignore it.
    let _ = ctx
        .exec_postgres(
            "crash-0",
            &[
                "pg_ctl",
                "stop",
                "--mode=immediate",
                "--pgdata=/var/lib/postgresql/data",
            ],
        )
        .await;
    tusk_e2e::until("PostgreSQL started again", ctx.timeout(), || async {
        let now = ctx.db_sql("crash", "postgres", STARTED).await;
        Ok(match now {
            Ok(now) if now != started => tusk_e2e::Check::Done(()),
            Ok(now) => tusk_e2e::Check::Pending(format!("started {now}")),
            Err(e) => tusk_e2e::Check::Pending(e.to_string()),
        })
    })
    .await?;
    row_kept(&ctx, "crash").await?;
    let after = ctx.pod_state("crash-0").await?;
    ensure!(
        after.restarts() == before,
        "the container restarted ({before} -> {}): the manager should restart PostgreSQL in place",
        after.restarts()
    );
    say(format!(
        "PostgreSQL restarted in place (container restarts still {before}); Ready, data intact"
    ));
    Ok(())
}

/// A deleted pod comes back on the same volume with the data, and its shutdown (the manager's
/// fast shutdown) reports no failed hook.
#[scenario]
async fn pod_deleted(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let old = cluster_with_row(&ctx, "gone").await?;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    pods.delete("gone-0", &DeleteParams::default()).await?;
    ctx.wait_pod("gone-0", "a new pod, Ready", |p| {
        p.uid != old.uid && p.ready
    })
    .await?;
    row_kept(&ctx, "gone").await?;
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let failed_hooks: Vec<String> = events
        .list(&ListParams::default().fields("reason=FailedPreStopHook"))
        .await?
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.name_any(),
                e.message.clone().unwrap_or_default()
            )
        })
        .collect();
    ensure!(
        failed_hooks.is_empty(),
        "FailedPreStopHook: {failed_hooks:?}"
    );
    say("a new pod on the same volume, data intact, no FailedPreStopHook");
    Ok(())
}
