//! A password changed in its Secret, on real pods, as the README shows it: `kubectl patch` of
//! `<name>-app`'s `password`. The operator makes its verifier, the kubelet refreshes the file in
//! the pods, the primary's manager sets it: the new password logs in through `-rw`, the old one
//! is refused, the Secret's URI carries the new one, and no pod restarted.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams};
use tusk_e2e::manifests::cluster;
use tusk_e2e::replication::service_ip;
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};

/// Logs in as the app through `-rw` with `password`, verifying the server with the published
/// CA; the server's words when refused.
async fn app_login(
    ctx: &Ctx,
    name: &str,
    password: &str,
) -> Result<std::result::Result<(), String>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let ca = (config_maps.get(&format!("{name}-ca.crt")).await?.data)
        .and_then(|mut d| d.remove("ca.crt"))
        .context("no ca.crt published")?;
    let tls = tusk_pgtls::verifying_pem(ca.as_bytes(), "the published CA")?;
    let ip = service_ip(ctx, &format!("{name}-rw")).await?;
    let mut config = tokio_postgres::Config::new();
    config
        .host(format!("{name}-rw.{}.svc", ctx.ns))
        .hostaddr(ip.parse().context(format!("address {ip:?}"))?)
        .port(5432)
        .user("app")
        .dbname("app")
        .password(password)
        .connect_timeout(Duration::from_secs(3));
    let connect = tusk_pgtls::connect(&config, Some(tls), "app");
    Ok(
        match tokio::time::timeout(Duration::from_secs(5), connect).await {
            Err(_) => Err("no answer within 5s".to_owned()),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e
                .as_db_error()
                .map_or_else(|| format!("{e:#}"), |db| db.message().to_owned())),
        },
    )
}

/// Waits (at most `limit`) until `password` logs in as the app; fails with the last refusal.
async fn logs_in_within(
    ctx: &Ctx,
    name: &str,
    password: &str,
    what: &str,
    limit: Duration,
) -> Result {
    until(format!("{what} to log in"), limit, || async {
        Ok(match app_login(ctx, name, password).await? {
            Ok(()) => Check::Done(()),
            Err(e) => Check::Pending(e),
        })
    })
    .await
}

#[scenario]
async fn a_password_changed_in_its_secret_becomes_the_roles_without_a_restart_on_real_pods(
    ctx: Ctx,
) -> Result {
    ctx.require_real_pods()?;
    let name = "pw";
    ctx.apply(&cluster(name, None)).await?;
    ctx.wait_ready(&[name]).await?;
    let pod = format!("{name}-0");
    let before = ctx.pod_state(&pod).await?;
    let secret = format!("{name}-app");
    let old = ctx.secret_value(&secret, "password").await?;
    // Tried again for a while: a new `-rw` ClusterIP can refuse the first connections until the
    // node's proxy routes it (as the writers' first sessions do); the last error is reported.
    logs_in_within(
        &ctx,
        name,
        &old,
        "the generated password",
        Duration::from_secs(60),
    )
    .await?;
    // What the README shows: a new password in the Secret, nothing else.
    let new = format!("Rotated{}", ctx.ns.replace('-', ""));
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let patch = serde_json::json!({"stringData": {"password": new}});
    secrets
        .patch(&secret, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let changed = Instant::now();
    logs_in_within(
        &ctx,
        name,
        &new,
        "the new password",
        Duration::from_secs(300),
    )
    .await?;
    let took = changed.elapsed();
    let refused = app_login(&ctx, name, &old).await?;
    ensure!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("password authentication failed")),
        "the old password: {refused:?}"
    );
    until(
        "the Secret's URI to carry it",
        Duration::from_secs(60),
        || async {
            let uri = ctx.secret_value(&secret, "uri").await?;
            let pgpass = ctx.secret_value(&secret, "pgpass").await?;
            Ok(Check::when(
                uri.contains(&new) && pgpass.contains(&new) && !uri.contains(&old),
                "the URI and pgpass still carry the old password",
            ))
        },
    )
    .await?;
    let after = ctx.pod_state(&pod).await?;
    ensure!(
        after.restarts() == before.restarts() && after.uid == before.uid,
        "the pod restarted or was replaced"
    );
    say(format!(
        "{secret}'s password changed: the new one logs in through -rw after {:.1}s, the old \
         one refused ({:?}); uri and pgpass carry the new one; 0 restarts",
        took.as_secs_f64(),
        refused.err().unwrap_or_default()
    ));
    Ok(())
}
