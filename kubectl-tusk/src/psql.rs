//! `kubectl tusk psql NAME [--replica] [--owner] [-- ARGS]`: psql inside an instance through
//! `kubectl exec`, which already handles terminals, signals and authentication to the API
//! server. psql connects over the local socket as the superuser (pg_hba.conf trusts `peer`
//! there), so no password travels; `--owner` switches the session to the database owner role.

use k8s_openapi::api::core::v1::Pod;
use kube::{Client, ResourceExt};
use tusk::crd::PostgreSQL;
use tusk::resources::SUPERUSER_NAME;

use crate::cluster::{database_pods_selector, get_postgresql, list};
use crate::error::{Error, Result};

/// Which instance to connect to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Primary,
    Replica,
}

/// The instance pod of `pg` for `target` among `pods`: the primary is the Lease holder the
/// status reports (`-rw` selects it); a replica is any other ready instance.
pub fn pick_pod(pg: &PostgreSQL, pods: &[Pod], target: Target) -> Result<String> {
    let primary = crate::status::summary::primary_of(pg);
    let ready = |p: &&Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let mut candidates: Vec<String> = pods
        .iter()
        .filter(ready)
        .map(ResourceExt::name_any)
        .filter(|name| (name == &primary) == (target == Target::Primary))
        .collect();
    candidates.sort();
    candidates.into_iter().next().ok_or_else(|| {
        Error::Invalid(match target {
            Target::Primary => format!("the primary {primary} is not ready"),
            Target::Replica => format!(
                "no ready replica of {} (spec.instances: {})",
                pg.name_any(),
                pg.spec.instances
            ),
        })
    })
}

/// The arguments of `kubectl` that run psql in `pod` on the application database.
pub fn kubectl_args(
    pg: &PostgreSQL,
    namespace: &str,
    pod: &str,
    owner: bool,
    tty: bool,
    extra: &[String],
) -> Vec<String> {
    let bootstrap = &pg.spec.bootstrap;
    let mut args: Vec<String> = ["exec", "-n", namespace, pod, "-c", "postgres"]
        .map(String::from)
        .into();
    // -i always, so that `psql -f -` and pipes work; -t only when stdin is a terminal.
    args.push(if tty { "-it" } else { "-i" }.to_owned());
    args.push("--".to_owned());
    if owner {
        // The superuser may SET ROLE to any role: the session then acts as the owner.
        args.extend([
            "env".to_owned(),
            format!("PGOPTIONS=-c role={}", bootstrap.owner),
        ]);
    }
    args.extend(
        [
            "psql",
            "-U",
            SUPERUSER_NAME,
            "-d",
            bootstrap.database.as_str(),
        ]
        .map(String::from),
    );
    args.extend(extra.iter().cloned());
    args
}

/// Runs psql in the chosen instance of `namespace/name`; returns psql's exit code.
pub async fn run(
    client: &Client,
    namespace: &str,
    name: &str,
    target: Target,
    owner: bool,
    extra: &[String],
) -> Result<i32> {
    let pg = get_postgresql(client, namespace, name).await?;
    let pods: Vec<Pod> = list(client, namespace, &database_pods_selector(name)).await?;
    let pod = pick_pod(&pg, &pods, target)?;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let args = kubectl_args(&pg, namespace, &pod, owner, tty, extra);
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let status = tokio::process::Command::new(&kubectl)
        .args(&args)
        .status()
        .await
        .map_err(Error::io(format!(
            "running {kubectl} exec (set KUBECTL to its path)"
        )))?;
    Ok(status.code().unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster() -> PostgreSQL {
        let spec = json!({"storage": {"size": "1Gi"}, "bootstrap": {"database": "shop", "owner": "owner1"}});
        tusk::crd::fixtures::postgresql("prod", "shop", spec, serde_json::Value::Null)
    }

    fn pod(name: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    #[test]
    fn psql_runs_as_the_superuser_on_the_application_database() {
        let args = kubectl_args(
            &cluster(),
            "prod",
            "shop-0",
            false,
            true,
            &["-c".into(), "select 1".into()],
        );
        assert_eq!(
            args.join(" "),
            "exec -n prod shop-0 -c postgres -it -- psql -U postgres -d shop -c select 1"
        );
    }

    #[test]
    fn owner_sessions_take_the_owner_role_without_a_password() {
        let args = kubectl_args(&cluster(), "prod", "shop-0", true, false, &[]);
        assert_eq!(
            args.join(" "),
            "exec -n prod shop-0 -c postgres -i -- env PGOPTIONS=-c role=owner1 psql -U postgres -d shop"
        );
    }

    #[test]
    fn the_primary_is_the_lease_holder_the_status_reports() {
        let mut pg = cluster();
        pg.status = Some(tusk::crd::PostgreSQLStatus {
            current_primary: Some("shop-1".into()),
            ..Default::default()
        });
        let pods = [pod("shop-0", true), pod("shop-1", true)];
        assert_eq!(pick_pod(&pg, &pods, Target::Primary).unwrap(), "shop-1");
        assert_eq!(pick_pod(&pg, &pods, Target::Replica).unwrap(), "shop-0");
    }

    #[test]
    fn the_primary_is_ordinal_zero_and_replicas_must_exist() {
        let pg = cluster();
        let pods = [pod("shop-0", true), pod("shop-1", false)];
        assert_eq!(pick_pod(&pg, &pods, Target::Primary).unwrap(), "shop-0");
        let err = pick_pod(&pg, &pods, Target::Replica)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no ready replica of shop"), "{err}");
    }
}
