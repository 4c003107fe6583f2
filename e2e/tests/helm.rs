//! The Helm chart (deploy/helm/tusk) against the real API server: every rendered object passes a
//! server-side dry run (schemas, strict fields, CRDs identical to the installed ones or the
//! apply conflicts), and the namespace-scoped RBAC, applied for real, lets the operator's
//! ServiceAccount read Secrets in the watched namespaces only.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use tusk_e2e::apply::documents;
use tusk_e2e::kubectl::kubectl_without_warnings;
use tusk_e2e::testbin::{repo, tool};
use tusk_e2e::{Context, Ctx, Result, ensure, say, scenario};

/// The pinned helm: TUSK_HELM_BIN (scripts/test.sh sets it), else built by scripts/testbin.sh.
async fn helm_bin() -> Result<String> {
    tool("helm", "TUSK_HELM_BIN").await
}

/// `helm template` of the chart as release `fullname` in `ns`, with `--set` values `sets`.
async fn render(ns: &str, fullname: &str, sets: &[String]) -> Result<String> {
    let chart = repo().join("deploy/helm/tusk");
    let mut command = tokio::process::Command::new(helm_bin().await?);
    command
        .args(["template", "tusk"])
        .arg(&chart)
        .args(["--namespace", ns, "--include-crds"])
        .arg(format!("--set=fullnameOverride={fullname}"));
    for set in sets {
        command.arg(format!("--set={set}"));
    }
    let out = command.output().await.context("running helm template")?;
    ensure!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `kind/name` of each rendered document, lower-case kind as `kubectl -o name` prints it
/// without the group.
fn kinds_and_names(yaml: &str) -> Result<Vec<(String, String)>> {
    Ok(documents(yaml)?
        .iter()
        .map(|d| {
            let kind = d["kind"].as_str().unwrap_or_default().to_lowercase();
            let name = d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (kind, name)
        })
        .collect())
}

/// `kubectl apply --server-side` of `yaml` (a dry run unless `persist`); the `-o name` lines.
async fn apply(ctx: &Ctx, yaml: &str, persist: bool) -> Result<Vec<String>> {
    let file = std::env::temp_dir().join(format!("{}-helm-{}.yaml", ctx.ns, persist));
    std::fs::write(&file, yaml).context("writing the rendered chart")?;
    let path = file.to_string_lossy().into_owned();
    let mut args = vec![
        "apply",
        "--server-side",
        "--field-manager=helm-e2e",
        "-o",
        "name",
    ];
    if !persist {
        args.push("--dry-run=server");
    }
    args.extend(["-f", &path]);
    let out = kubectl_without_warnings(&args).await;
    let _ = std::fs::remove_file(&file);
    Ok(out?.lines().map(str::to_owned).collect())
}

/// Every rendered object is accepted by the API server, none missing from its answer.
async fn dry_run(ctx: &Ctx, yaml: &str, expected_kinds: &[&str]) -> Result {
    let rendered = kinds_and_names(yaml)?;
    let accepted = apply(ctx, yaml, false).await?;
    for (kind, name) in &rendered {
        // `kubectl -o name` prints kind.group/name.
        let found = accepted.iter().any(|line| {
            line.split_once('/').is_some_and(|(resource, found)| {
                found == name && resource.split('.').next() == Some(kind.as_str())
            })
        });
        ensure!(
            found,
            "{kind}/{name} missing from the dry run: {accepted:?}"
        );
    }
    for kind in expected_kinds {
        ensure!(
            rendered.iter().any(|(k, _)| k == kind),
            "the chart rendered no {kind}: {rendered:?}"
        );
    }
    say(format!(
        "server-side dry run accepted all {} objects",
        accepted.len()
    ));
    Ok(())
}

#[scenario]
async fn helm_chart_dry_run(ctx: Ctx) -> Result {
    let watched = ctx.extra_namespace().await?;
    let fullname = format!("{}-op", ctx.ns);
    let all_namespaces = render(&ctx.ns, &fullname, &[]).await?;
    let kinds = [
        "customresourcedefinition",
        "serviceaccount",
        "clusterrole",
        "clusterrolebinding",
        "role",
        "rolebinding",
        "service",
        "deployment",
    ];
    say("default values (every namespace):");
    dry_run(&ctx, &all_namespaces, &kinds).await?;

    let scoped_values = [format!("watchNamespaces={{{},{watched}}}", ctx.ns)];
    let scoped = render(&ctx.ns, &fullname, &scoped_values).await?;
    say(format!("watchNamespaces [{}, {watched}]:", ctx.ns));
    dry_run(&ctx, &scoped, &kinds).await?;
    let docs = documents(&scoped)?;
    let args = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .map(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].to_string())
        .unwrap_or_default();
    let flag = format!("--namespace={},{watched}", ctx.ns);
    ensure!(
        args.contains(&flag),
        "the operator's args lack {flag}: {args}"
    );
    for ns in [&ctx.ns, &watched] {
        let role = docs.iter().any(|d| {
            d["kind"] == "Role" && d["metadata"]["namespace"] == **ns && grants_secrets(d)
        });
        ensure!(role, "no Role in {ns} grants Secrets");
    }
    Ok(())
}

/// Whether an RBAC rule list grants anything on Secrets.
fn grants_secrets(role: &serde_json::Value) -> bool {
    role["rules"].as_array().into_iter().flatten().any(|rule| {
        rule["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r == "secrets" || r == "*"))
    })
}

#[scenario]
async fn helm_namespace_scoped_rbac(ctx: Ctx) -> Result {
    let watched = ctx.extra_namespace().await?;
    let unwatched = ctx.extra_namespace().await?;
    let fullname = format!("{}-op", ctx.ns);
    let values = [format!("watchNamespaces={{{watched}}}")];
    let rendered = render(&ctx.ns, &fullname, &values).await?;
    let docs = documents(&rendered)?;
    let cluster_wide: Vec<_> = docs.iter().filter(|d| d["kind"] == "ClusterRole").collect();
    ensure!(!cluster_wide.is_empty(), "no ClusterRole rendered");
    ensure!(
        !cluster_wide.iter().any(|d| grants_secrets(d)),
        "a ClusterRole grants Secrets in namespace-scoped mode: {cluster_wide:?}"
    );
    // Only the RBAC and its ServiceAccount, for real; the Deployment would only start a pod.
    let rbac_kinds = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ];
    let rbac: Vec<_> = docs
        .iter()
        .filter(|d| rbac_kinds.iter().any(|kind| d["kind"] == *kind))
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rbac});
    let applied = apply(&ctx, &list.to_string(), true).await?;
    say(format!("applied {} RBAC objects", applied.len()));
    let outcome = check_access(&ctx, &fullname, &watched, &unwatched).await;
    remove_cluster_objects(&ctx, &fullname).await;
    outcome
}

/// What the ServiceAccount may do, asked of the API server's authorizer.
async fn check_access(ctx: &Ctx, account: &str, watched: &str, unwatched: &str) -> Result {
    let user = format!("system:serviceaccount:{}:{account}", ctx.ns);
    let cases = [
        ("list", "", "secrets", Some(watched), true),
        ("create", "batch", "jobs", Some(watched), true),
        (
            "patch",
            "tusk.dev",
            "postgresqls/status",
            Some(watched),
            true,
        ),
        ("list", "", "secrets", Some(unwatched), false),
        ("get", "", "secrets", Some(unwatched), false),
        ("list", "tusk.dev", "postgresqls", Some(unwatched), false),
        ("list", "", "secrets", None, false),
        ("get", "storage.k8s.io", "storageclasses", None, true),
        (
            "patch",
            "coordination.k8s.io",
            "leases",
            Some(ctx.ns.as_str()),
            true,
        ),
    ];
    for (verb, group, resource, namespace, expected) in cases {
        let allowed = can(ctx, &user, verb, group, resource, namespace).await?;
        let scope = namespace.map_or("cluster-wide".to_owned(), |ns| format!("in {ns}"));
        say(format!("{verb} {resource} {scope}: allowed={allowed}"));
        ensure!(
            allowed == expected,
            "{user} {verb} {resource} {scope}: allowed={allowed}, expected {expected}"
        );
    }
    Ok(())
}

async fn can(
    ctx: &Ctx,
    user: &str,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool> {
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub.to_owned())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                namespace: namespace.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(ctx.client.clone());
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .context("creating a SubjectAccessReview")?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The cluster-scoped RBAC outlives the scenario's namespaces unless removed here.
async fn remove_cluster_objects(ctx: &Ctx, name: &str) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let bindings: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
    let roles: Api<ClusterRole> = Api::all(ctx.client.clone());
    if let Err(e) = bindings.delete(name, &DeleteParams::default()).await {
        say(format!("(ClusterRoleBinding {name} not removed: {e})"));
    }
    if let Err(e) = roles.delete(name, &DeleteParams::default()).await {
        say(format!("(ClusterRole {name} not removed: {e})"));
    }
}
