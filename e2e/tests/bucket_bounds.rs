//! A backup endpoint that accepts connections and never answers (a tarpit) must not stall the
//! operator: its bucket calls time out (TUSK_BUCKET_TIMEOUT, 30 s by default), so the clusters
//! using it report why, `onDelete: Retain` still releases them, and other clusters converge
//! while they hang.

use std::time::Instant;

use tusk_e2e::cluster::{condition, conditions};
use tusk_e2e::manifests::{S3Backup, cluster};
use tusk_e2e::{Ctx, Level, Result, absent, ensure, say, scenario};

/// The cluster controller's reconcile slots (operator.rs: `concurrency(8)`), plus one: without
/// deadlines every slot would hang on the tarpit.
const TARPIT_CLUSTERS: usize = 9;

/// Accepts every connection on 127.0.0.1 and holds it open without answering.
async fn tarpit() -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    Ok(endpoint)
}

#[scenario]
async fn bucket_tarpit_does_not_stall_other_clusters(ctx: Ctx) -> Result {
    if !ctx.platform.operator_on_this_host() {
        return Err(absent(
            Level::OperatorProcess,
            "the operator must reach the test's loopback tarpit",
        ));
    }
    let ns = ctx.ns.clone();
    let endpoint = tarpit().await?;
    let names: Vec<String> = (0..TARPIT_CLUSTERS).map(|i| format!("stuck{i}")).collect();
    let backup = S3Backup::lifecycle(5, "Delete", &endpoint);
    for name in &names {
        ctx.apply(&cluster(name, Some(&backup))).await?;
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    ctx.wait_ready(&refs).await?;
    // Each deletion runs the Delete finalizer, which lists the prefix on the tarpit.
    for name in &names {
        ctx.postgresqls_in(&ns)
            .delete(name, &Default::default())
            .await?;
    }
    let started = Instant::now();
    ctx.apply(&cluster("healthy", None)).await?;
    ctx.wait_ready(&["healthy"]).await?;
    say(format!(
        "healthy Ready {:.1}s after {TARPIT_CLUSTERS} clusters started cleaning up on a tarpit",
        started.elapsed().as_secs_f64()
    ));
    for name in &names {
        ctx.wait_condition_in(&ns, name, "Cleanup", "False").await?;
        let pg = ctx.postgresql_in(&ns, name).await?;
        let cleanup = condition(conditions(&pg), "Cleanup");
        let reason = cleanup.map(|c| c.reason.clone()).unwrap_or_default();
        let message = cleanup.map(|c| c.message.clone()).unwrap_or_default();
        ensure!(
            reason == "StoreUnreachable",
            "{name}: Cleanup reason {reason}"
        );
        ensure!(
            message.contains("did not finish within"),
            "{name}: {message}"
        );
    }
    // The escape hatch: Retain releases a cluster whose cleanup hangs.
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    ctx.release_with_retain_in(&ns, &names).await?;
    say("every tarpit call timed out (Cleanup=False/StoreUnreachable); Retain released them");
    Ok(())
}
