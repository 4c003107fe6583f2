//! A password changed in its Secret, on real pods, as the README shows it: `kubectl patch` of
//! `<name>-app`'s `password`. The operator makes its verifier, the kubelet refreshes the file in
//! the pods, the primary's manager sets it: the new password logs in through `-rw`, the old one
//! is refused, the Secret's URI carries the new one, and no pod restarted.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tusk_e2e::login::{login, logs_in_within};
use tusk_e2e::manifests::cluster;
use tusk_e2e::{Check, Ctx, Result, ensure, say, scenario, until};

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
    let app = (name, "app", "app");
    logs_in_within(
        &ctx,
        app,
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
        app,
        &new,
        "the new password",
        Duration::from_secs(300),
    )
    .await?;
    let took = changed.elapsed();
    let refused = login(&ctx, name, "app", "app", &old).await?.map(drop);
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
