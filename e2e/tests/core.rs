//! The operator's core duties on any cluster: CRDs, the samples, self-healing and drift,
//! garbage collection, and isolation between namespaces.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use tusk_e2e::manifests::{S3Backup, cluster};
use tusk_e2e::objects::names;
use tusk_e2e::{
    Check, Context, Ctx, Kind, Obj, Result, ensure, fail, say, scenario, until, until_none,
};

#[scenario]
async fn crds(ctx: Ctx) -> Result {
    for file in ["postgresqls.tusk.dev.yaml", "backups.tusk.dev.yaml"] {
        let path = ctx.settings.repo.join("crds").join(file);
        let yaml = std::fs::read_to_string(&path).context(format!("reading {}", path.display()))?;
        tusk_e2e::apply::apply_yaml(&ctx.client, None, &yaml, None).await?;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    for name in ["postgresqls.tusk.dev", "backups.tusk.dev"] {
        until(format!("CRD {name} Established"), ctx.timeout(), || async {
            let crd = crds.get(name).await?;
            let established = crd.status.and_then(|s| s.conditions).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            Ok(Check::when(established, "not Established"))
        })
        .await?;
    }
    say("CRDs applied server-side and Established");
    // The description of spec.backup in the CRD, whitespace-normalised, is what explain prints.
    let crd = crds.get("postgresqls.tusk.dev").await?;
    let want = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| {
            s.properties
                .as_ref()?
                .get("spec")?
                .properties
                .as_ref()?
                .get("backup")?
                .description
                .clone()
        })
        .map(|d| normalise(&d))
        .unwrap_or_default();
    ensure!(
        !want.is_empty(),
        "the CRD has no description for spec.backup"
    );
    let got = normalise(&tusk_e2e::kubectl::kubectl(&["explain", "postgresql.spec.backup"]).await?);
    ensure!(
        got.contains(&want),
        "kubectl explain postgresql.spec.backup lacks '{want}': {got}"
    );
    ensure!(
        got.contains("destination") && got.contains("schedule"),
        "explain lists no destination/schedule fields"
    );
    say(format!("kubectl explain postgresql.spec.backup: {want}"));
    Ok(())
}

fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[scenario]
async fn samples(ctx: Ctx) -> Result {
    let clusters = ctx.apply_samples().await?;
    ensure!(!clusters.is_empty(), "no PostgreSQL in samples/");
    for name in &clusters {
        if ctx
            .postgresql_in(&ctx.ns, name)
            .await?
            .spec
            .restore
            .is_some()
        {
            say(format!(
                "{name} restores from a backup: applied, not waited for"
            ));
            continue;
        }
        ctx.wait_ready(&[name]).await?;
        let children = ctx.check_children(name).await?;
        say(format!(
            "{name} Ready; children owned and labelled: {}",
            names(&children)
        ));
    }
    Ok(())
}

#[scenario]
async fn self_healing(ctx: Ctx) -> Result {
    let (ns, name) = (ctx.ns.clone(), "heal");
    let children = nightly_cluster_children(&ctx, name).await?;
    let claim = Obj::new(Kind::Pvc, format!("data-{name}-0"));
    let claim_uid = ctx.uid_in(&ns, &claim).await?;
    ensure!(!claim_uid.is_empty(), "{ns}/{claim} does not exist");
    for obj in children {
        let old = ctx.uid_in(&ns, &obj).await?;
        ctx.delete_in(&ns, &obj).await?;
        until(
            format!("{ns}/{obj} to be re-created"),
            ctx.timeout(),
            || async {
                let uid = ctx.uid_in(&ns, &obj).await?;
                Ok(Check::when(
                    !uid.is_empty() && uid != old,
                    format!("uid '{uid}'"),
                ))
            },
        )
        .await?;
        ctx.assert_owned_in(&ns, &obj, name).await?;
        say(format!("deleted {obj}: re-created"));
    }
    ctx.wait_ready(&[name]).await?;
    // The claims belong to the PostgreSQL: deleting the StatefulSet left the data in place
    // (with the StatefulSet's own deletion policy, the volume went with it and the cluster,
    // its Lease remembering it had bootstrapped, never started again).
    let kept = ctx.uid_in(&ns, &claim).await?;
    ensure!(
        kept == claim_uid,
        "{claim} was replaced when the StatefulSet was deleted (uid {claim_uid} -> '{kept}')"
    );
    let owner = ctx.postgresql_in(&ns, name).await?.metadata.uid;
    let owners = ctx
        .get_in(&ns, &claim)
        .await?
        .map(|c| c.metadata.owner_references);
    let owners: Vec<String> = owners
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.uid)
        .collect();
    ensure!(
        owner.as_ref().is_some_and(|uid| owners.contains(uid)),
        "{claim} is not owned by the PostgreSQL {name} ({owner:?}); its owners: {owners:?}"
    );
    say(format!(
        "{claim} kept through the deletions, owned by the PostgreSQL"
    ));

    // Drift: hand edits of fields the operator owns are reverted.
    let sts: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
    let first_container = |s: &StatefulSet| {
        s.spec
            .template
            .spec
            .as_ref()
            .and_then(|p| p.containers.first())
            .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
            .unwrap_or_default()
    };
    let (container, image) = first_container(&sts.get(name).await?);
    let drift = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": container, "image": "example.com/drift:1"}]}}}});
    sts.patch(name, &PatchParams::default(), &Patch::Strategic(&drift))
        .await?;
    until(
        format!("the StatefulSet image to be reverted to {image}"),
        ctx.timeout(),
        || async {
            let (_, now) = first_container(&sts.get(name).await?);
            Ok(Check::when(now == image, format!("image {now}")))
        },
    )
    .await?;
    say(format!(
        "StatefulSet image changed by hand: reverted to {image}"
    ));

    let other = serde_json::json!({"tusk.dev/cluster": "someone-else"});
    let selector = rw_selector_reverted(&ctx, name, other, ctx.timeout()).await?;
    say(format!(
        "Service selector changed by hand: reverted to {selector:?}"
    ));
    ctx.wait_ready(&[name]).await
}

/// Cluster `name` with nightly backups, Ready, every child checked; returns the children.
async fn nightly_cluster_children(ctx: &Ctx, name: &str) -> Result<Vec<Obj>> {
    ctx.apply(&cluster(name, Some(&S3Backup::nightly())))
        .await?;
    ctx.wait_ready(&[name]).await?;
    ctx.check_children(name).await
}

fn selector_of(service: &Service) -> std::collections::BTreeMap<String, String> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.selector.clone())
        .unwrap_or_default()
}

/// Merges `change` into the selector of `<cluster>-rw` by hand and waits (up to `timeout`) for
/// the operator to put the selector back as it was (`-rw` has none: its EndpointSlice is the
/// operator's); returns that selector.
async fn rw_selector_reverted(
    ctx: &Ctx,
    cluster: &str,
    change: serde_json::Value,
    timeout: std::time::Duration,
) -> Result<std::collections::BTreeMap<String, String>> {
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let rw = format!("{cluster}-rw");
    let want = selector_of(&services.get(&rw).await?);
    let patch = serde_json::json!({"spec": {"selector": change}});
    services
        .patch(&rw, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    until(
        format!("the selector of service/{rw} to be reverted to {want:?}"),
        timeout,
        || async {
            let now = selector_of(&services.get(&rw).await?);
            Ok(Check::when(now == want, format!("{now:?}")))
        },
    )
    .await?;
    Ok(want)
}

/// A selector added to `-rw` by hand must go, or kube-controller-manager routes clients to
/// whatever it selects while the operator reports the cluster converged.
#[scenario]
async fn selector_extra_key(ctx: Ctx) -> Result {
    let name = "sel";
    ctx.apply(&cluster(name, None)).await?;
    ctx.wait_ready(&[name]).await?;
    let extra = serde_json::json!({"extra": "yes"});
    rw_selector_reverted(&ctx, name, extra, std::time::Duration::from_secs(30)).await?;
    say("a key added to the Service selector by hand: reverted");
    Ok(())
}

#[scenario]
async fn deletion_gc(ctx: Ctx) -> Result {
    let (ns, name) = (ctx.ns.clone(), "gone");
    nightly_cluster_children(&ctx, name).await?;
    ctx.delete_postgresql_and_wait_in(&ns, name).await?;
    let kinds = [
        Kind::CHILDREN.as_slice(),
        &[Kind::Job, Kind::Pod, Kind::Pvc],
    ]
    .concat();
    until_none(
        format!("every child of {name} (and its volume claim) to be garbage-collected"),
        ctx.timeout(),
        || async {
            let mut left = ctx
                .labelled_in(&ns, &kinds, &format!("tusk.dev/cluster={name}"))
                .await?;
            left.extend(ctx.labelled_in(&ns, &[Kind::Pvc], "").await?);
            Ok(left)
        },
    )
    .await?;
    say(
        "PostgreSQL deleted: Secrets, ConfigMap, Services, StatefulSet, pod, PVC and CronJob collected",
    );
    Ok(())
}

#[scenario]
async fn two_namespaces(ctx: Ctx) -> Result {
    let (a, b, name) = (ctx.ns.clone(), ctx.extra_namespace().await?, "twin");
    for ns in [&a, &b] {
        ctx.apply_in(ns, &cluster(name, Some(&S3Backup::nightly())))
            .await?;
    }
    for ns in [&a, &b] {
        ctx.wait_ready_in(ns, &[name]).await?;
    }
    for ns in [&a, &b] {
        ctx.check_children_in(ns, name).await?;
    }
    let password = |ns: String| {
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
        async move {
            let secret = secrets.get(&format!("{name}-app")).await?;
            secret
                .data
                .and_then(|d| d.get("password").cloned())
                .context(format!("no password in {ns}/{name}-app"))
        }
    };
    ensure!(
        password(a.clone()).await? != password(b.clone()).await?,
        "both clusters got the same password"
    );

    // A change in one namespace touches only that namespace.
    let configmaps = |ns: &str| Api::<ConfigMap>::namespaced(ctx.client.clone(), ns);
    let config = format!("{name}-config");
    let before_a = configmaps(&a).get(&config).await?.resource_version();
    ctx.merge_patch_postgresql_in(
        &b,
        name,
        serde_json::json!({"spec": {"parameters": {"work_mem": "8MB"}}}),
    )
    .await?;
    until(
        format!("the ConfigMap in {b} to carry work_mem"),
        ctx.timeout(),
        || async {
            let data = serde_json::to_string(&configmaps(&b).get(&config).await?.data)?;
            Ok(Check::when(data.contains("work_mem"), data))
        },
    )
    .await?;
    ctx.wait_ready_in(&b, &[name]).await?;
    let after_a = configmaps(&a).get(&config).await?.resource_version();
    ensure!(
        after_a == before_a,
        "a change in {b} rewrote {a}'s ConfigMap"
    );
    say(format!("a change to {b}/{name} left {a}/{name} untouched"));

    // Deleting one leaves the other whole.
    let mut uids_b = Vec::new();
    for obj in ctx.children_in(&b, name).await? {
        let uid = ctx.uid_in(&b, &obj).await?;
        uids_b.push((obj, uid));
    }
    ctx.delete_postgresql_and_wait_in(&a, name).await?;
    let selector = format!("tusk.dev/cluster={name}");
    until_none(
        format!("the children in {a} to be collected"),
        ctx.timeout(),
        || ctx.labelled_in(&a, &Kind::CHILDREN, &selector),
    )
    .await?;
    for (obj, uid) in &uids_b {
        if &ctx.uid_in(&b, obj).await? != uid {
            fail!("{b}/{obj} changed when {a}/{name} was deleted");
        }
    }
    let ready = ctx.ready_status_in(&b, name).await?;
    ensure!(
        ready == "True",
        "{b}/{name} is not Ready after {a}/{name} was deleted"
    );
    say(format!(
        "deleting {a}/{name} left every child of {b}/{name} in place, and it Ready"
    ));
    Ok(())
}
