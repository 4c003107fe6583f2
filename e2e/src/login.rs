//! Logging in as an application does: through `<cluster>-rw` by its DNS name, over TLS verified
//! against the cluster's published CA, with a role's password. A refusal comes back in the
//! server's words, so a scenario can tell "password authentication failed" from anything else.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio_postgres::Client;

use crate::replication::service_ip;
use crate::wait::{Check, until};
use crate::{Context, Ctx, Result};

/// A session as `user` on `db` of `cluster`, or the server's reason for refusing it.
pub async fn login(
    ctx: &Ctx,
    cluster: &str,
    user: &str,
    db: &str,
    password: &str,
) -> Result<std::result::Result<Client, String>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let ca = (config_maps.get(&format!("{cluster}-ca.crt")).await?.data)
        .and_then(|mut d| d.remove("ca.crt"))
        .context("no ca.crt published")?;
    let tls = tusk_pgtls::verifying_pem(ca.as_bytes(), "the published CA")?;
    let ip = service_ip(ctx, &format!("{cluster}-rw")).await?;
    let mut config = tokio_postgres::Config::new();
    config
        .host(format!("{cluster}-rw.{}.svc", ctx.ns))
        .hostaddr(ip.parse().context(format!("address {ip:?}"))?)
        .port(5432)
        .user(user)
        .dbname(db)
        .password(password)
        .connect_timeout(Duration::from_secs(3));
    let connect = tusk_pgtls::connect(&config, Some(tls), "e2e login");
    Ok(
        match tokio::time::timeout(Duration::from_secs(5), connect).await {
            Err(_) => Err("no answer within 5s".to_owned()),
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(e
                .as_db_error()
                .map_or_else(|| format!("{e:#}"), |db| db.message().to_owned())),
        },
    )
}

/// Waits (at most `limit`) until `password` logs `user` in; fails with the last refusal.
pub async fn logs_in_within(
    ctx: &Ctx,
    (cluster, user, db): (&str, &str, &str),
    password: &str,
    what: &str,
    limit: Duration,
) -> Result<Client> {
    until(format!("{what} to log in"), limit, || async {
        Ok(match login(ctx, cluster, user, db, password).await? {
            Ok(client) => Check::Done(client),
            Err(e) => Check::Pending(e),
        })
    })
    .await
}
