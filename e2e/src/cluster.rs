//! PostgreSQL clusters and Backups as the scenarios see them: readiness and conditions, the
//! children the operator keeps for a cluster, and their ownership.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use tusk::crd::{Backup, ClientService, PostgreSQL, PostgreSQLStatus};

use crate::objects::{Kind, Obj};
use crate::wait::{Check, until, until_none};
use crate::{Context, Ctx, Result, ensure};

/// `type=status/reason` of every condition, for messages.
pub fn describe(conditions: &[Condition]) -> String {
    let all: Vec<String> = conditions
        .iter()
        .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
        .collect();
    if all.is_empty() {
        "no conditions".into()
    } else {
        all.join("; ")
    }
}

pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

pub fn conditions(pg: &PostgreSQL) -> &[Condition] {
    pg.status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default()
}

pub fn backup_conditions(backup: &Backup) -> &[Condition] {
    backup
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default()
}

/// The children the operator keeps for a cluster: Secrets, ConfigMaps, Services, StatefulSet,
/// and the backup CronJob when a schedule is set (its ServiceAccount, Role, RoleBinding and
/// Lease are not among the kinds the suite lists).
pub fn children(pg: &PostgreSQL) -> Vec<Obj> {
    let name = pg.metadata.name.as_deref().unwrap_or_default();
    let mut all = vec![
        Obj::new(Kind::Secret, format!("{name}-superuser")),
        Obj::new(Kind::Secret, format!("{name}-app")),
        Obj::new(Kind::Secret, format!("{name}-replication")),
        Obj::new(Kind::Secret, format!("{name}-monitoring")),
        Obj::new(Kind::Secret, format!("{name}-ca")),
        Obj::new(Kind::Secret, format!("{name}-server-tls")),
        Obj::new(Kind::Secret, format!("{name}-verifiers")),
        Obj::new(Kind::ConfigMap, format!("{name}-config")),
        Obj::new(Kind::ConfigMap, format!("{name}-ca.crt")),
        Obj::new(Kind::Service, format!("{name}-rw")),
        Obj::new(Kind::Service, format!("{name}-hl")),
        Obj::new(Kind::StatefulSet, name),
    ];
    let services = pg.spec.services.clone().unwrap_or_default();
    for (service, suffix) in [(ClientService::ReadOnly, "ro"), (ClientService::Any, "r")] {
        if services.enabled(service) {
            all.push(Obj::new(Kind::Service, format!("{name}-{suffix}")));
        }
    }
    if pg
        .spec
        .backup
        .as_ref()
        .is_some_and(|b| !b.schedule.is_empty())
    {
        all.push(Obj::new(Kind::CronJob, format!("{name}-backup")));
    }
    all
}

impl Ctx {
    pub fn postgresqls_in(&self, ns: &str) -> Api<PostgreSQL> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub fn backups_in(&self, ns: &str) -> Api<Backup> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub async fn postgresql_in(&self, ns: &str, name: &str) -> Result<PostgreSQL> {
        self.postgresqls_in(ns)
            .get(name)
            .await
            .context(format!("PostgreSQL {ns}/{name}"))
    }

    pub async fn children_in(&self, ns: &str, name: &str) -> Result<Vec<Obj>> {
        Ok(children(&self.postgresql_in(ns, name).await?))
    }

    /// Waits until each cluster's condition `type_` has `status`.
    pub async fn wait_condition_in(
        &self,
        ns: &str,
        name: &str,
        type_: &str,
        status: &str,
    ) -> Result {
        self.wait_condition_within(ns, name, type_, status, self.timeout())
            .await
    }

    pub async fn wait_condition_within(
        &self,
        ns: &str,
        name: &str,
        type_: &str,
        status: &str,
        timeout: std::time::Duration,
    ) -> Result {
        let api = self.postgresqls_in(ns);
        until(
            format!("postgresql {ns}/{name} {type_}={status}"),
            timeout,
            || async {
                let pg = api.get(name).await?;
                let found = condition(conditions(&pg), type_).is_some_and(|c| c.status == status);
                Ok(Check::when(found, describe(conditions(&pg))))
            },
        )
        .await
    }

    /// Waits until each cluster is Ready at its current generation: a Ready condition written
    /// before the latest change (whose reconcile may still be on its way) does not count.
    pub async fn wait_ready_in(&self, ns: &str, names: &[&str]) -> Result {
        let api = self.postgresqls_in(ns);
        for name in names {
            until(
                format!("postgresql {ns}/{name} Ready=True at its generation"),
                self.timeout(),
                || async {
                    let pg = api.get(name).await?;
                    let current = condition(conditions(&pg), "Ready").is_some_and(|c| {
                        c.status == "True" && c.observed_generation == pg.metadata.generation
                    });
                    Ok(Check::when(current, describe(conditions(&pg))))
                },
            )
            .await?;
        }
        Ok(())
    }

    pub async fn wait_ready(&self, names: &[&str]) -> Result {
        self.wait_ready_in(&self.ns.clone(), names).await
    }

    /// Waits for a Backup's condition (e.g. Completed=True).
    pub async fn wait_backup_condition_in(&self, ns: &str, name: &str, type_: &str) -> Result {
        let api = self.backups_in(ns);
        until(
            format!("Backup {ns}/{name} {type_}=True"),
            self.timeout(),
            || async {
                let backup = api.get(name).await?;
                let found = condition(backup_conditions(&backup), type_)
                    .is_some_and(|c| c.status == "True");
                Ok(Check::when(found, format!("{:?}", backup.status)))
            },
        )
        .await
    }

    /// Controlled by the PostgreSQL `cluster` (its uid) and labelled `tusk.dev/cluster`.
    pub async fn assert_owned_in(&self, ns: &str, obj: &Obj, cluster: &str) -> Result {
        let owner_uid = self
            .postgresql_in(ns, cluster)
            .await?
            .metadata
            .uid
            .unwrap_or_default();
        let object = self
            .get_in(ns, obj)
            .await?
            .context(format!("{ns}/{obj} does not exist"))?;
        let controller = object
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .find(|o| o.controller == Some(true))
            .map(|o| format!("{}/{}/{}", o.kind, o.name, o.uid))
            .unwrap_or_default();
        let label = object
            .metadata
            .labels
            .unwrap_or_default()
            .get("tusk.dev/cluster")
            .cloned()
            .unwrap_or_default();
        let got = format!("{controller}|{label}");
        let want = format!("PostgreSQL/{cluster}/{owner_uid}|{cluster}");
        ensure!(
            got == want,
            "{ns}/{obj}: controller/label is '{got}', want '{want}'"
        );
        Ok(())
    }

    /// Every child exists, is owned and labelled; the data volume claim is Bound.
    pub async fn check_children_in(&self, ns: &str, name: &str) -> Result<Vec<Obj>> {
        let children = self.children_in(ns, name).await?;
        for obj in &children {
            until(format!("{ns}/{obj}"), self.timeout(), || async {
                Ok(Check::when(self.get_in(ns, obj).await?.is_some(), "absent"))
            })
            .await?;
            self.assert_owned_in(ns, obj, name).await?;
        }
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let claim = format!("data-{name}-0");
        until(
            format!("PVC {ns}/{claim} Bound"),
            self.timeout(),
            || async {
                let phase = claims
                    .get(&claim)
                    .await?
                    .status
                    .and_then(|s| s.phase)
                    .unwrap_or_default();
                Ok(Check::when(phase == "Bound", format!("phase {phase:?}")))
            },
        )
        .await?;
        Ok(children)
    }

    pub async fn check_children(&self, name: &str) -> Result<Vec<Obj>> {
        self.check_children_in(&self.ns.clone(), name).await
    }

    /// Waits until the object is gone (or replaced: `kubectl delete --wait` semantics by uid).
    pub async fn wait_gone_in(&self, ns: &str, obj: &Obj, old_uid: &str) -> Result {
        until(
            format!("{ns}/{obj} to be deleted"),
            self.timeout(),
            || async {
                let uid = self.uid_in(ns, obj).await?;
                Ok(Check::when(
                    uid.is_empty() || uid != old_uid,
                    format!("uid {uid}"),
                ))
            },
        )
        .await
    }

    /// Deletes and waits until the object with this uid is gone.
    pub async fn delete_and_wait_in(&self, ns: &str, obj: &Obj) -> Result {
        let uid = self.uid_in(ns, obj).await?;
        self.delete_in(ns, obj).await?;
        self.wait_gone_in(ns, obj, &uid).await
    }

    /// Deletes a cluster and waits until it is gone (finalizers included).
    pub async fn delete_postgresql_and_wait_in(&self, ns: &str, name: &str) -> Result {
        let api = self.postgresqls_in(ns);
        let uid = api.get(name).await?.metadata.uid.unwrap_or_default();
        api.delete(name, &Default::default()).await?;
        until(
            format!("postgresql {ns}/{name} to be deleted"),
            self.timeout(),
            || async {
                let current = api.get_opt(name).await?;
                let gone = current
                    .as_ref()
                    .is_none_or(|pg| pg.metadata.uid.as_deref() != Some(&uid));
                let seen = current
                    .map(|pg| describe(conditions(&pg)))
                    .unwrap_or_default();
                Ok(Check::when(gone, seen))
            },
        )
        .await
    }

    /// Waits until `accept` holds for the status of PostgreSQL `ns/name`; `accept` also says
    /// what it saw, for the timeout message.
    pub async fn wait_status_in(
        &self,
        ns: &str,
        name: &str,
        what: impl std::fmt::Display,
        accept: impl Fn(&PostgreSQLStatus) -> (bool, String),
    ) -> Result {
        let api = self.postgresqls_in(ns);
        until(format!("{ns}/{name}: {what}"), self.timeout(), || async {
            let status = api.get(name).await?.status.unwrap_or_default();
            let (done, seen) = accept(&status);
            Ok(Check::when(done, seen))
        })
        .await
    }

    /// Sets `onDelete: Retain` on clusters whose deletion waits for their bucket and waits until
    /// they are gone: the escape hatch when a prefix cannot be emptied.
    pub async fn release_with_retain_in(&self, ns: &str, names: &[&str]) -> Result {
        let retain = serde_json::json!({"spec": {"backup": {"onDelete": "Retain"}}});
        for name in names {
            self.merge_patch_postgresql_in(ns, name, retain.clone())
                .await?;
        }
        let api = self.postgresqls_in(ns);
        until_none("Retain to release the clusters", self.timeout(), || async {
            let mut left = Vec::new();
            for name in names {
                if api.get_opt(name).await?.is_some() {
                    left.push(name.to_string());
                }
            }
            Ok(left)
        })
        .await
    }

    /// The Ready condition's status ("" when there is none).
    pub async fn ready_status_in(&self, ns: &str, name: &str) -> Result<String> {
        let pg = self.postgresql_in(ns, name).await?;
        Ok(condition(conditions(&pg), "Ready")
            .map(|c| c.status.clone())
            .unwrap_or_default())
    }
}
