//! A CA rotation on a real API server, driven by the operator binary: each step made due by
//! setting the CA Secret's `tusk.dev/ca-next-step` to the past (what the clock does after an
//! overlap), each reaching every `ca.crt` (the server Secret the pods mount, the app and
//! superuser Secrets, ConfigMap `<name>-ca.crt`) with the bundle the step wants, without a
//! rollout. With a real
//! PostgreSQL (L4, real pods), the application keeps connecting with `verify-full` through its
//! Secret's `ca.crt` at every step (at L4 until the last: its stand-in server never reloads).
//!
//! On real pods, under load: two instances, a writer through `-rw` for the whole run (a new
//! `verify-full` session per row, with the published `ca.crt` read at that moment), the
//! server certificate renewed twice besides (its recorded expiry set to the past, what the
//! clock does two thirds into its life), each certificate served by every pod on 5432 soon
//! after it is issued, and every pod's `/status` read once a second as the operator reads it.
//! The claims: 0 failed writes, 0 refused `/status` reads, 0 pod restarts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams};
use tusk::resources::ca_rotation::{CA_NEXT_STEP_ANNOTATION, NEXT_CRT, PREVIOUS_CRT};
use tusk::resources::tls;
use tusk_e2e::faults::instance_status;
use tusk_e2e::manifests::cluster;
use tusk_e2e::replication::{Writer, lost, pod_ip, replicated, rows};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, fail, say, scenario, until};

fn text(secret: &Secret, key: &str) -> Option<String> {
    let value = secret.data.as_ref()?.get(key)?;
    Some(String::from_utf8_lossy(&value.0).into_owned())
}

fn next_step(secret: &Secret) -> Option<String> {
    secret
        .metadata
        .annotations
        .as_ref()?
        .get(CA_NEXT_STEP_ANNOTATION)
        .cloned()
}

/// The certificates of a PEM bundle, in order.
fn certificates(bundle: &str) -> Vec<String> {
    bundle
        .split_inclusive("-----END CERTIFICATE-----\n")
        .map(str::to_owned)
        .collect()
}

/// Makes the next rotation step due and waits until the operator took it: the CA Secret
/// scheduled anew. Returns the CA Secret after the step.
async fn take_step(ctx: &Ctx, name: &str) -> Result<Secret> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let ca_name = format!("{name}-ca");
    let past = "2000-01-01T00:00:00Z";
    let patch = serde_json::json!({"metadata": {"annotations": {CA_NEXT_STEP_ANNOTATION: past}}});
    secrets
        .patch(&ca_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    until(format!("{ca_name} stepped"), ctx.timeout(), || async {
        let secret = secrets.get(&ca_name).await?;
        let seen = next_step(&secret).unwrap_or_default();
        Ok(match seen.as_str() != past && !seen.is_empty() {
            true => Check::Done(secret),
            false => Check::Pending(format!("next step {seen:?}")),
        })
    })
    .await
}

/// Waits until the server, app and superuser Secrets and ConfigMap `<name>-ca.crt` all hold
/// `bundle` in `ca.crt`.
async fn bundle_everywhere(ctx: &Ctx, name: &str, bundle: &str) -> Result {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    for which in ["server-tls", "app", "superuser"] {
        let secret_name = format!("{name}-{which}");
        until(
            format!("{secret_name} to carry the bundle"),
            ctx.timeout(),
            || async {
                let secret = secrets.get(&secret_name).await?;
                let held = text(&secret, tls::CA_CRT).unwrap_or_default();
                Ok(Check::when(
                    held == bundle,
                    format!("{} certificates", certificates(&held).len()),
                ))
            },
        )
        .await?;
    }
    // And the bundle published without a key, for clients that hold no credential of ours.
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let published = format!("{name}-ca.crt");
    until(
        format!("ConfigMap {published} to carry the bundle"),
        ctx.timeout(),
        || async {
            let config_map = config_maps.get(&published).await?;
            let held = (config_map.data.as_ref())
                .and_then(|d| d.get(tls::CA_CRT))
                .cloned()
                .unwrap_or_default();
            Ok(Check::when(
                held == bundle,
                format!("{} certificates", certificates(&held).len()),
            ))
        },
    )
    .await?;
    Ok(())
}

/// The application connects through its Secret, verifying the server with its `ca.crt`.
async fn app_connects(ctx: &Ctx, name: &str) -> Result {
    let who = ctx
        .platform
        .app_sql(&ctx.ns, name, "SELECT current_user")
        .await?;
    ensure!(who.trim() == "app", "connected as {:?}", who.trim());
    Ok(())
}

/// The three steps of a CA rotation; on real pods (`pods`) between two renewals of the server
/// certificate, each certificate checked as served by every pod.
async fn rotate(ctx: &Ctx, name: &str, pods: &[String]) -> Result {
    let ctx = ctx.clone();
    if !pods.is_empty() {
        renew_leaf(&ctx, name, pods).await?;
        say("renewed: a new server certificate, served by every pod");
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let statefulsets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let generation = statefulsets.get(name).await?.metadata.generation;
    let Some(old) = text(&secrets.get(&format!("{name}-ca")).await?, tls::CA_CRT) else {
        fail!("no ca.crt in the CA Secret");
    };
    let server_before = text(
        &secrets.get(&format!("{name}-server-tls")).await?,
        tls::TLS_CRT,
    );

    // 1. Published: both trusted, the old CA first (it still signs).
    let published = take_step(&ctx, name).await?;
    let new = text(&published, NEXT_CRT).unwrap_or_default();
    ensure!(!new.is_empty() && new != old, "no new CA published");
    bundle_everywhere(&ctx, name, &format!("{old}{new}")).await?;
    app_connects(&ctx, name).await?;
    say("published: every ca.crt holds the old and the new CA; the app connects");

    // 2. Promoted: the new CA signs a new server certificate; the old one is still trusted.
    let promoted = take_step(&ctx, name).await?;
    ensure!(
        text(&promoted, tls::CA_CRT).as_deref() == Some(new.as_str()),
        "not promoted"
    );
    ensure!(
        text(&promoted, PREVIOUS_CRT).as_deref() == Some(old.as_str()),
        "old CA dropped early"
    );
    bundle_everywhere(&ctx, name, &format!("{new}{old}")).await?;
    let server_after = text(
        &secrets.get(&format!("{name}-server-tls")).await?,
        tls::TLS_CRT,
    );
    ensure!(
        server_after != server_before,
        "the server certificate was not issued again"
    );
    app_connects(&ctx, name).await?;
    served_everywhere(&ctx, name, pods).await?;
    say("promoted: the new CA signs, both trusted; the app connects");

    // 3. The old CA leaves every ca.crt.
    let retired = take_step(&ctx, name).await?;
    let data = retired.data.clone().unwrap_or_default();
    ensure!(
        !data.contains_key(NEXT_CRT) && !data.contains_key(PREVIOUS_CRT),
        "the CA Secret still holds a second CA"
    );
    bundle_everywhere(&ctx, name, &new).await?;
    if ctx.platform.runs_pods() {
        app_connects(&ctx, name).await?;
    }
    ensure!(
        statefulsets.get(name).await?.metadata.generation == generation,
        "the rotation rolled the pods"
    );
    let scheduled = next_step(&retired).unwrap_or_default();
    until("status.certificates.caNextStep", ctx.timeout(), || async {
        let pg = ctx.postgresql_in(&ctx.ns, name).await?;
        let times = pg.status.and_then(|s| s.certificates).unwrap_or_default();
        let shown = times
            .ca_next_step
            .map(|t| t.0.to_string())
            .unwrap_or_default();
        Ok(Check::when(
            shown == scheduled && times.server_not_after.is_some(),
            format!("{shown:?}, not {scheduled:?}"),
        ))
    })
    .await?;
    say(
        "retired: every ca.crt holds the new CA alone; the StatefulSet never changed; the \
         status shows the next step",
    );
    if !pods.is_empty() {
        renew_leaf(&ctx, name, pods).await?;
        say("renewed again: signed by the new CA, served by every pod");
    }
    Ok(())
}

#[scenario]
async fn ca_rotation_reaches_every_ca_crt_step_by_step_without_a_rollout(ctx: Ctx) -> Result {
    ctx.require_l4()?;
    let name = "rotate";
    let pods: Vec<String> = match ctx.platform.runs_pods() {
        true => (0..2).map(|i| format!("{name}-{i}")).collect(),
        false => Vec::new(),
    };
    let manifest = match pods.is_empty() {
        true => cluster(name, None),
        false => replicated(name, 2),
    };
    ctx.apply(&manifest).await?;
    ctx.wait_ready(&[name]).await?;
    ctx.wait_sql(name).await?;
    let before = pod_states(&ctx, &pods).await?;
    let writer = match pods.is_empty() {
        true => None,
        // A new verify-full session per row, with the Secret's ca.crt of that moment.
        false => Some(Writer::fresh_sessions(&ctx, name).await?),
    };
    let done = AtomicBool::new(false);
    let (rotated, (reads, refused)) = tokio::join!(
        async {
            let rotated = rotate(&ctx, name, &pods).await;
            done.store(true, Ordering::Relaxed);
            rotated
        },
        read_statuses(&ctx, &pods, &done),
    );
    rotated?;
    let Some(writer) = writer else {
        return Ok(());
    };
    writer.wait_ack_after(Instant::now(), ctx.timeout()).await?;
    let failed = writer.failures();
    let reasons = writer.failure_reasons();
    let acks = writer.stop();
    let missing = lost(&acks, &rows(&ctx, name).await?);
    let after = pod_states(&ctx, &pods).await?;
    ensure!(
        after == before,
        "pods restarted or replaced (uid, restarts): {before:?} then {after:?}"
    );
    ensure!(
        refused.is_empty(),
        "{} of {reads} /status reads failed: {refused:?}",
        refused.len()
    );
    ensure!(
        failed == 0 && missing.is_empty(),
        "{failed} writes failed ({reasons:?}), {} acknowledged rows lost",
        missing.len()
    );
    say(format!(
        "under load: {} writes acknowledged, 0 failed, 0 lost; {reads} /status reads, 0 \
         refused; 0 restarts of {} pods",
        acks.len(),
        pods.len()
    ));
    Ok(())
}

/// Each pod's uid and its database container's restarts.
async fn pod_states(ctx: &Ctx, pods: &[String]) -> Result<Vec<(String, i32)>> {
    let mut states = Vec::new();
    for pod in pods {
        let state = ctx.pod_state(pod).await?;
        states.push((state.uid.clone(), state.restarts()));
    }
    Ok(states)
}

/// Reads every pod's `/status` as the operator does (TLS verified by the cluster's CA, its
/// token), about once a second until `done`: how many reads, and the failures.
async fn read_statuses(ctx: &Ctx, pods: &[String], done: &AtomicBool) -> (usize, Vec<String>) {
    let (mut reads, mut failures) = (0, Vec::new());
    while !done.load(Ordering::Relaxed) {
        for pod in pods {
            reads += 1;
            if let Err(e) = instance_status(ctx, pod).await {
                failures.push(format!("{pod}: {e}"));
            }
        }
        // Pacing, not synchronisation: `done` ends the loop.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    (reads, failures)
}

/// Makes the server certificate due (its recorded expiry in the past) and waits until the
/// operator issued another and every pod serves it.
async fn renew_leaf(ctx: &Ctx, name: &str, pods: &[String]) -> Result {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let server = format!("{name}-server-tls");
    let before = text(&secrets.get(&server).await?, tls::TLS_CRT).unwrap_or_default();
    let past = "2000-01-01T00:00:00Z";
    let patch = serde_json::json!({"metadata": {"annotations": {tls::NOT_AFTER_ANNOTATION: past}}});
    secrets
        .patch(&server, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    until(format!("{server} issued again"), ctx.timeout(), || async {
        let now = text(&secrets.get(&server).await?, tls::TLS_CRT).unwrap_or_default();
        Ok(Check::when(now != before, "the same certificate"))
    })
    .await?;
    served_everywhere(ctx, name, pods).await
}

/// Waits until every pod serves, on 5432, the server certificate its Secret holds (the
/// manager reloaded PostgreSQL; no restart).
async fn served_everywhere(ctx: &Ctx, name: &str, pods: &[String]) -> Result {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let server = format!("{name}-server-tls");
    for pod in pods {
        let ip = pod_ip(ctx, pod).await?;
        until(
            format!("{pod} to serve {server}'s certificate"),
            ctx.timeout(),
            || async {
                let held = text(&secrets.get(&server).await?, tls::TLS_CRT).unwrap_or_default();
                let leaf = certificates(&held).into_iter().next().unwrap_or_default();
                let served = served_certificate(&ip).await?;
                Ok(Check::when(
                    squeeze(&served) == squeeze(&leaf),
                    "another certificate served",
                ))
            },
        )
        .await?;
    }
    Ok(())
}

/// The certificate PostgreSQL at `ip`:5432 presents (openssl's postgres STARTTLS), PEM.
async fn served_certificate(ip: &str) -> Result<String> {
    let out = tokio::process::Command::new("openssl")
        .args(["s_client", "-starttls", "postgres", "-connect"])
        .arg(format!("{ip}:5432"))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("running openssl s_client")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let begin = text.find("-----BEGIN CERTIFICATE-----");
    let end = text.find("-----END CERTIFICATE-----");
    match (begin, end) {
        (Some(b), Some(e)) => Ok(text[b..e + "-----END CERTIFICATE-----".len()].to_owned()),
        _ => fail!(
            "no certificate from {ip}:5432: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn squeeze(pem: &str) -> String {
    pem.split_whitespace().collect()
}
