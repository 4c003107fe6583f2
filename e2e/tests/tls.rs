//! TLS on real pods: the server certificate the operator issued holds under
//! `sslmode=verify-full` through every Service and pod name, short and qualified, with TLS 1.3;
//! any other name is refused. Names are checked against the certificate, not resolved: each
//! connection dials the Service's or pod's IP (`hostaddr`), so no cluster DNS is needed.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tusk_e2e::manifests::cluster;
use tusk_e2e::replication::{pod_ip, service_ip};
use tusk_e2e::{Context, Ctx, Result, ensure, fail, say, scenario};

/// The TLS version of a session as the app role, opened from inside `pod` to `hostaddr` with
/// `sslmode` (`verify-full`: the server's certificate verified for `host` against the CA
/// mounted in the pod); Err is psql's error.
async fn tls_version(
    ctx: &Ctx,
    pod: &str,
    password: &str,
    (host, hostaddr): (&str, &str),
    sslmode: &str,
) -> Result<std::result::Result<String, String>> {
    let conninfo = format!(
        "host={host} hostaddr={hostaddr} port=5432 user=app dbname=app sslmode={sslmode} \
         sslrootcert=/etc/tusk-tls/ca.crt connect_timeout=5"
    );
    let sql = "SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
    ctx.psql_in_pod(pod, &conninfo, password, sql).await
}

#[scenario]
async fn tls_verify_full_through_every_service_and_pod_name(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let name = "tls";
    ctx.apply(&cluster(name, None)).await?;
    ctx.wait_ready(&[name]).await?;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let app = secrets.get(&format!("{name}-app")).await?;
    let password = app
        .data
        .as_ref()
        .and_then(|d| d.get("password"))
        .map(|p| String::from_utf8_lossy(&p.0).into_owned())
        .context(format!("no password in {name}-app"))?;
    let pod = format!("{name}-0");
    let ns = ctx.ns.clone();
    let targets = [
        (
            format!("{name}-rw"),
            service_ip(&ctx, &format!("{name}-rw")).await?,
        ),
        (
            format!("{name}-r"),
            service_ip(&ctx, &format!("{name}-r")).await?,
        ),
        (format!("{pod}.{name}-hl"), pod_ip(&ctx, &pod).await?),
    ];
    let mut checked = 0;
    for (base, ip) in &targets {
        for host in [
            base.clone(),
            format!("{base}.{ns}"),
            format!("{base}.{ns}.svc"),
            format!("{base}.{ns}.svc.cluster.local"),
        ] {
            match tls_version(&ctx, &pod, &password, (&host, ip), "verify-full").await? {
                Ok(version) => ensure!(
                    version == "TLSv1.3",
                    "verify-full as {host} ({ip}) gave a session on {version:?}"
                ),
                Err(error) => fail!("verify-full as {host} ({ip}) failed: {error}"),
            }
            checked += 1;
        }
    }
    let (_, rw_ip) = &targets[0];
    match tls_version(
        &ctx,
        &pod,
        &password,
        ("db.example.org", rw_ip),
        "verify-full",
    )
    .await?
    {
        Ok(version) => fail!("a name the certificate does not hold was accepted ({version})"),
        Err(error) => ensure!(
            error.contains("does not match host name"),
            "a wrong name failed for another reason: {error}"
        ),
    }
    let rw = format!("{name}-rw");
    let plaintext = match tls_version(&ctx, &pod, &password, (&rw, rw_ip), "disable").await? {
        Ok(version) => fail!("a session without TLS was accepted ({version:?})"),
        Err(error) if error.contains("no encryption") => error,
        Err(error) => fail!("a session without TLS failed for another reason: {error}"),
    };
    say(format!(
        "verify-full held for {checked} names ({}, short and qualified), TLSv1.3 each; \
         db.example.org refused; without TLS: {plaintext}",
        targets
            .iter()
            .map(|(base, _)| base.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}
