//! A role of the user's that logs in by client certificate, on real pods, with the inputs the
//! README shows: a `spec.pgHba` rule with method `cert`, the role made by hand, the certificate
//! issued by `kubectl tusk certificate` into a Secret of the user's, and the application
//! connecting with that Secret alone (its `tls.crt`, `tls.key` and `ca.crt`; no password)
//! through `-rw` with `verify-full`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tusk_e2e::manifests::cluster;
use tusk_e2e::plugin::ok;
use tusk_e2e::replication::service_ip;
use tusk_e2e::{Check, Context, Ctx, Result, ensure, fail, say, scenario, until};

/// The Secret's keys written to files in `dir` (what a pod mounting it would see).
async fn mounted(ctx: &Ctx, secret: &str, dir: &Path) -> Result<()> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let data = secrets.get(secret).await?.data.unwrap_or_default();
    std::fs::create_dir_all(dir)?;
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        let value = data
            .get(key)
            .context(format!("no {key} in Secret {secret}"))?;
        std::fs::write(dir.join(key), &value.0)?;
    }
    Ok(())
}

/// Connects as `user` to `dbname` through `-rw` (`ip`, verified as `host`), presenting the
/// mounted certificate when `with_certificate`; no password either way. The server's words
/// when refused.
async fn login(
    host: &str,
    ip: &str,
    dir: &Path,
    dbname: &str,
    with_certificate: bool,
) -> Result<std::result::Result<String, String>> {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let identity = with_certificate.then_some(tusk_pgtls::Identity {
        cert: &cert,
        key: &key,
    });
    let tls = tusk_pgtls::verifying_as(&dir.join("ca.crt"), identity)?;
    let mut config = tokio_postgres::Config::new();
    config
        .host(host)
        .hostaddr(ip.parse().context(format!("address {ip:?}"))?)
        .port(5432)
        .user("reporting")
        .dbname(dbname)
        .connect_timeout(Duration::from_secs(5));
    // TLS required and verified; channel binding as libpq's default (`prefer`): a
    // certificate login has no SCRAM exchange to bind (tusk-pgtls requires it for passwords).
    config.ssl_mode(tokio_postgres::config::SslMode::Require);
    let connected = tokio::time::timeout(Duration::from_secs(10), config.connect(tls))
        .await
        .context("no answer within 10s")?;
    Ok(match connected {
        Ok((client, connection)) => {
            tokio::spawn(connection);
            let row = client.query_one("SELECT current_user::text", &[]).await?;
            Ok(row.get(0))
        }
        Err(e) => Err(e
            .as_db_error()
            .map_or_else(|| chain(&e), |db| db.message().to_owned())),
    })
}

/// An error and its causes ("invalid configuration: password missing"): tokio-postgres
/// prints only the first.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(&format!(": {e}"));
        cause = e.source();
    }
    text
}

#[scenario]
async fn a_role_logs_in_by_its_client_certificate_alone_on_real_pods(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let name = "certs";
    let manifest = format!(
        "{}  pgHba: [\"hostssl app reporting all cert\"]\n",
        cluster(name, None)
    );
    ctx.apply(&manifest).await?;
    ctx.wait_ready(&[name]).await?;
    let pod = format!("{name}-0");
    let local = "host=/var/run/postgresql user=postgres dbname=app";
    let made = "CREATE ROLE reporting LOGIN; GRANT pg_read_all_data TO reporting";
    if let Err(e) = ctx.psql_in_pod(&pod, local, "", made).await? {
        fail!("creating role reporting: {e}");
    }
    let printed = ok(&["certificate", name, "--role", "reporting", "-n", &ctx.ns]).await?;
    say(format!("kubectl tusk certificate: {}", printed.trim()));
    let secret = format!("{name}-reporting-tls");
    ensure!(
        printed.contains(&format!("Secret {}/{secret}", ctx.ns)),
        "{printed}"
    );
    let dir: PathBuf = std::env::temp_dir().join(format!("tusk-e2e-{}-certs", ctx.ns));
    mounted(&ctx, &secret, &dir).await?;
    let ip = service_ip(&ctx, &format!("{name}-rw")).await?;
    let host = format!("{name}-rw.{}.svc", ctx.ns);
    // The rule's database, with the certificate: in, as the role it names (tried again while
    // the node's proxy may not route the new Service yet).
    let user = until(
        "reporting to log in by certificate",
        Duration::from_secs(60),
        || async {
            Ok(match login(&host, &ip, &dir, "app", true).await? {
                Ok(user) => Check::Done(user),
                Err(e) => Check::Pending(e),
            })
        },
    )
    .await?;
    ensure!(user == "reporting", "logged in as {user}");
    // Without it: the rule asks for one.
    let refused = login(&host, &ip, &dir, "app", false).await?;
    let Err(without) = refused else {
        fail!("reporting got in without its certificate");
    };
    ensure!(without.contains("certificate"), "{without}");
    // Outside the rule's database the last rule applies: a password, which it has none of.
    let refused = login(&host, &ip, &dir, "postgres", true).await?;
    let Err(outside) = refused else {
        fail!("reporting got into database postgres by certificate");
    };
    ensure!(outside.contains("password"), "{outside}");
    // Tusk's roles are not the plugin's to issue.
    let run =
        tusk_e2e::plugin::kubectl_tusk(&["certificate", name, "--role", "postgres", "-n", &ctx.ns])
            .await?;
    ensure!(
        run.code == Some(1) && run.stderr.contains("Tusk's roles"),
        "a certificate for postgres: {:?} {}",
        run.code,
        run.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
    say(format!(
        "reporting logs in to app by the certificate in Secret {secret} alone (verify-full \
         through -rw, no password); without it refused ({without:?}); into postgres refused \
         ({outside:?}); a certificate for postgres refused by the plugin"
    ));
    Ok(())
}
