//! Security on a real API server: the NetworkPolicy `spec.networkPolicy` asks for, and a server
//! certificate the user brings (`spec.tls.serverSecret`) served by a real PostgreSQL (L4).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use tusk::resources::{Cluster, tls};
use tusk_e2e::manifests::cluster;
use tusk_e2e::{Check, Ctx, Kind, Obj, Result, ensure, say, scenario, until};

/// `spec.networkPolicy` against the real API server: the NetworkPolicy it accepts, owned by the
/// cluster, with the clients named; gone once the field is removed.
#[scenario]
async fn network_policy_follows_the_spec(ctx: Ctx) -> Result {
    let (ns, name) = (ctx.ns.clone(), "fenced");
    let yaml = cluster(name, None)
        + "  networkPolicy:\n    clientNamespaces: {matchLabels: {team: shop}}\n";
    ctx.apply_in(&ns, &yaml).await?;
    let policies: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), &ns);
    until(
        format!("NetworkPolicy {ns}/{name}"),
        ctx.timeout(),
        || async {
            let policy = policies.get_opt(name).await?;
            let clients = policy
                .as_ref()
                .and_then(|p| p.spec.as_ref()?.ingress.as_ref()?.get(1).cloned())
                .and_then(|rule| rule.from?.first()?.namespace_selector.clone());
            let team = clients.and_then(|s| s.match_labels?.get("team").cloned());
            Ok(Check::when(
                team.as_deref() == Some("shop"),
                format!("client namespaces: {team:?}"),
            ))
        },
    )
    .await?;
    ctx.assert_owned_in(&ns, &Obj::new(Kind::NetworkPolicy, name), name)
        .await?;
    say("NetworkPolicy made, owned by the cluster, admitting the team's namespaces");
    let clusters: Api<tusk::PostgreSQL> = Api::namespaced(ctx.client.clone(), &ns);
    let remove = serde_json::json!({"spec": {"networkPolicy": null}});
    clusters
        .patch(name, &PatchParams::default(), &Patch::Merge(&remove))
        .await?;
    until(
        format!("NetworkPolicy {ns}/{name} to be deleted"),
        ctx.timeout(),
        || async {
            let left = policies.get_opt(name).await?.is_some();
            Ok(Check::when(!left, "still there".to_owned()))
        },
    )
    .await?;
    say("spec.networkPolicy removed: the NetworkPolicy deleted");
    Ok(())
}

/// A CA and server certificate made outside Tusk for cluster `name`, as Secret `secret` with
/// the keys cert-manager writes. Returns the CA certificate.
async fn user_certificate(ctx: &Ctx, name: &str, secret: &str) -> Result<String> {
    let pg: tusk::PostgreSQL = serde_json::from_value(serde_json::json!({
        "apiVersion": "tusk.dev/v1alpha1", "kind": "PostgreSQL",
        // Only the names matter here; Cluster::new wants a uid, as from the API server.
        "metadata": {"name": name, "namespace": ctx.ns, "uid": "made-outside-tusk"},
        "spec": {"storage": {"size": "1Gi"}},
    }))?;
    let cluster = Cluster::new(&pg)?;
    let now = time::OffsetDateTime::now_utc();
    let lifetimes = tls::Lifetimes::default();
    let ca = tls::issue_ca(&cluster, now, &lifetimes)?;
    let validity = tls::Validity::leaf(now, &lifetimes, now + lifetimes.ca);
    let server = tls::issue_server(&cluster, "cluster.local", &ca, validity)?;
    let data = [
        (tls::TLS_CRT, &server.cert),
        (tls::TLS_KEY, &server.key),
        (tls::CA_CRT, &ca.cert),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect::<BTreeMap<_, _>>();
    let mut object = Secret {
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data),
        ..Secret::default()
    };
    object.metadata.name = Some(secret.to_owned());
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    match secrets.get_opt(secret).await? {
        Some(old) => {
            object.metadata.resource_version = old.resource_version();
            secrets
                .replace(secret, &PostParams::default(), &object)
                .await?;
        }
        None => {
            secrets.create(&PostParams::default(), &object).await?;
        }
    }
    Ok(ca.cert)
}

/// The `ca.crt` Secret `name` holds, if any.
async fn ca_in(ctx: &Ctx, name: &str) -> Result<Option<String>> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let secret = secrets.get_opt(name).await?;
    let ca = secret.and_then(|s| s.data?.get(tls::CA_CRT).cloned());
    Ok(ca.map(|b| String::from_utf8_lossy(&b.0).into_owned()))
}

/// `spec.tls.serverSecret` with a real PostgreSQL (L4): Tusk issues nothing, the server presents
/// the user's certificate, the application's Secret carries the user's CA and `verify-full`
/// through it succeeds; the Secret replaced by a new CA's (a renewal by cert-manager) reaches
/// the credentials within the minute Tusk promises.
#[scenario]
async fn user_server_certificate_is_served_and_followed(ctx: Ctx) -> Result {
    ctx.require_l4()?;
    let (ns, name, secret) = (ctx.ns.clone(), "bring", "bring-tls");
    let first = user_certificate(&ctx, name, secret).await?;
    ctx.apply(&(cluster(name, None) + &format!("  tls: {{serverSecret: {secret}}}\n")))
        .await?;
    ctx.wait_ready(&[name]).await?;
    ctx.wait_sql(name).await?;
    for own in [format!("{name}-ca"), format!("{name}-server-tls")] {
        ensure!(ca_in(&ctx, &own).await?.is_none(), "Tusk issued {ns}/{own}");
    }
    ensure!(
        ca_in(&ctx, &format!("{name}-app")).await?.as_deref() == Some(first.as_str()),
        "{ns}/{name}-app does not carry the user's CA"
    );
    // pg.sh connects as the application does: verify-full with the app Secret's ca.crt.
    let who = ctx
        .platform
        .app_sql(&ns, name, "SELECT current_user")
        .await?;
    ensure!(who.trim() == "app", "connected as '{}'", who.trim());
    say("the user's certificate served, verified through the app Secret's ca.crt");

    let second = user_certificate(&ctx, name, secret).await?;
    ensure!(second != first, "the renewal made the same CA");
    until(
        format!("{ns}/{name}-app to carry the new CA"),
        ctx.timeout(),
        || async {
            let now = ca_in(&ctx, &format!("{name}-app")).await?;
            Ok(Check::when(
                now.as_deref() == Some(second.as_str()),
                "still the first CA".to_owned(),
            ))
        },
    )
    .await?;
    say("the Secret replaced by a new CA's: the credentials followed");
    Ok(())
}
