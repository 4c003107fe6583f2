//! Least privilege inside the cluster, attempted on real pods (issue 47): from a pod of the
//! namespace, with passwords read out of the cluster's Secrets (a leak), each attempt on the
//! database's trust boundaries is made and must be refused, and how it was refused is printed
//! as a table. Over the network every attempt dials the `-rw` Service's IP with `verify-full`.
//! And the instance managers' status port, flooded, fails nothing over.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tusk_e2e::manifests::cluster;
use tusk_e2e::replication::{
    Writer, current_primary, last_failover, pod_ip, service_ip, synchronous,
};
use tusk_e2e::{Context, Ctx, Result, ensure, fail, say, scenario};

/// The server's refusal in psql's output (its FATAL or ERROR line), not kubectl's exit line.
fn server_said(error: &str) -> &str {
    let said = error
        .lines()
        .find(|l| l.contains("FATAL") || l.contains("ERROR"));
    said.or(error.lines().next()).unwrap_or_default().trim()
}

#[scenario]
async fn least_privilege_attacks_from_the_namespace_are_refused_on_real_pods(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let name = "lp";
    ctx.apply(&cluster(name, None)).await?;
    ctx.wait_ready(&[name]).await?;
    let pod = format!("{name}-0");
    let rw = service_ip(&ctx, &format!("{name}-rw")).await?;
    let replication = ctx
        .secret_value(&format!("{name}-replication"), "password")
        .await?;
    let superuser = ctx
        .secret_value(&format!("{name}-superuser"), "password")
        .await?;
    let app = ctx.secret_value(&format!("{name}-app"), "password").await?;
    let over_tls = |user: &str, db: &str| {
        format!(
            "host={name}-rw hostaddr={rw} port=5432 user={user} dbname={db} sslmode=verify-full \
             sslrootcert=/etc/tusk-tls/ca.crt connect_timeout=5"
        )
    };
    let slot = "SELECT pg_create_physical_replication_slot('stolen')";
    let attempts = [
        (
            "the replication password, an ordinary session: create a slot",
            over_tls("tusk_replication", "postgres"),
            replication.as_str(),
            slot,
            "pg_hba.conf rejects",
        ),
        (
            "the superuser's password over the network",
            over_tls("postgres", "postgres"),
            superuser.as_str(),
            "SELECT 1",
            "certificate",
        ),
        (
            "the replication password as the backup role: read the app's tables",
            over_tls("tusk_backup", "app"),
            replication.as_str(),
            "SELECT count(*) FROM pg_class",
            "certificate",
        ),
        (
            "the replication password as the rewind role",
            over_tls("tusk_rewind", "postgres"),
            replication.as_str(),
            "SELECT 1",
            "certificate",
        ),
        (
            "the app's password: create a slot",
            over_tls("app", "app"),
            app.as_str(),
            slot,
            // PostgreSQL 15: "must be superuser or replication role to use replication slots";
            // 16 on: "permission denied to use replication slots".
            "to use replication slots",
        ),
    ];
    let mut table = vec!["| attempt | refused |".to_owned(), "|---|---|".to_owned()];
    for (attempt, conninfo, password, sql, refusal) in attempts {
        match ctx.psql_in_pod(&pod, &conninfo, password, sql).await? {
            Ok(out) => fail!("{attempt}: it worked ({out})"),
            Err(error) => {
                ensure!(
                    error.contains(refusal),
                    "{attempt}: refused for another reason than {refusal:?}: {error}"
                );
                table.push(format!("| {attempt} | {} |", server_said(&error)));
            }
        }
    }
    // And the app still gets in, so the refusals above are not a broken server.
    match ctx
        .psql_in_pod(&pod, &over_tls("app", "app"), &app, "SELECT current_user")
        .await?
    {
        Ok(user) => ensure!(user == "app", "logged in as {user}"),
        Err(error) => fail!("the application could not log in: {error}"),
    }

    // A database superuser in the pod (the local socket) looks for credentials: the manager's
    // environment (passwords, bucket keys) is root's and not dumpable; no server process has
    // a password in its own.
    let local = "host=/var/run/postgresql user=postgres dbname=postgres";
    let environ = "SELECT encode(pg_read_binary_file('/proc/1/environ'), 'escape')";
    match ctx.psql_in_pod(&pod, local, "", environ).await? {
        Ok(_) => fail!("a database superuser read the instance manager's environment"),
        Err(error) => {
            ensure!(error.contains("ermission denied"), "{error}");
            table.push(format!(
                "| a database superuser reads the manager's environment (/proc/1/environ) | {} |",
                server_said(&error)
            ));
        }
    }
    let own = "SELECT encode(pg_read_binary_file('/proc/self/environ'), 'escape')";
    match ctx.psql_in_pod(&pod, local, "", own).await? {
        Ok(env) => {
            for secret in [&superuser, &app, &replication] {
                ensure!(
                    !env.contains(secret.as_str()),
                    "a backend's environment holds a password"
                );
            }
            table.push(
                "| a database superuser reads its backend's environment | no password in it |"
                    .into(),
            );
        }
        Err(error) => fail!("reading the backend's own environment: {error}"),
    }
    // What the pod has of the superuser's and the app's passwords: their verifiers, which
    // pg_authid shows a superuser anyway, and which log no one in.
    for file in ["superuser", "app"] {
        let read = format!(
            "SELECT pg_read_file('{}/{file}')",
            tusk_contract::roles::VERIFIERS_DIR
        );
        match ctx.psql_in_pod(&pod, local, "", &read).await? {
            Ok(text) => ensure!(
                text.starts_with("SCRAM-SHA-256$")
                    && !text.contains(superuser.as_str())
                    && !text.contains(app.as_str()),
                "the mounted {file} file is not a verifier alone"
            ),
            Err(error) => fail!("reading the mounted {file} verifier: {error}"),
        }
    }
    table.push(
        "| a database superuser reads the pod's files for the superuser's and app's passwords \
         | verifiers only (as in pg_authid); no password |"
            .into(),
    );

    // A spec naming another cluster's Secret: refused before anything is read or mounted.
    let borrower = "lp-borrow";
    let spec = cluster(borrower, None) + &format!("  tls: {{serverSecret: {name}-server-tls}}\n");
    ctx.apply(&spec).await?;
    ctx.wait_condition_in(&ctx.ns, borrower, "Ready", "False")
        .await?;
    let pg = ctx.postgresql_in(&ctx.ns, borrower).await?;
    let ready = (pg.status.iter())
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == "Ready")
        .context("no Ready condition")?;
    ensure!(
        ready.reason == "SecretNotAllowed",
        "another cluster's Secret in a spec: Ready=False for {}: {}",
        ready.reason,
        ready.message
    );
    table.push(format!(
        "| a spec names another cluster's server Secret | Ready=False {}: {} |",
        ready.reason, ready.message
    ));
    say(format!(
        "attack table (attempted, refused, how):\n{}",
        table.join("\n")
    ));
    Ok(())
}

/// How long the status port is flooded: the two minutes of the attack.
const FLOOD: Duration = Duration::from_secs(120);
/// Connections held open at once, re-opened as the manager drops them.
const SOCKETS: usize = 300;

/// Holds [`SOCKETS`] connections to `addr` until `until`: two in three silent (never a TLS
/// ClientHello), one in three sending garbage once; each re-opened as soon as it is dropped.
/// Returns how many were opened in all.
async fn flood(addr: String, until: Instant) -> usize {
    let mut opened = 0;
    let mut held: Vec<Option<TcpStream>> = (0..SOCKETS).map(|_| None).collect();
    while Instant::now() < until {
        for (i, slot) in held.iter_mut().enumerate() {
            let closed = match slot {
                None => true,
                Some(stream) => {
                    let mut byte = [0u8; 64];
                    match stream.try_read(&mut byte) {
                        Ok(0) => true,
                        Ok(_) => false,
                        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                    }
                }
            };
            if !closed {
                continue;
            }
            *slot = match TcpStream::connect(&addr).await {
                Ok(mut stream) => {
                    opened += 1;
                    if i % 3 == 0 {
                        let _ = stream
                            .write_all(b"\x16\x03\x01garbage garbage\r\n\r\n")
                            .await;
                    }
                    Some(stream)
                }
                Err(_) => None,
            };
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    opened
}

/// The status port flooded for two minutes from the node (no token needed to open a socket),
/// under a writer with `required` durability: the probes keep answering, so the primary never
/// leaves `-rw`, no failover, no container restart, and every write is acknowledged.
#[scenario]
async fn status_port_flood_neither_fails_over_nor_restarts_on_real_pods(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let name = "flood";
    ctx.apply(&synchronous(name, 2, "required")).await?;
    ctx.wait_ready(&[name]).await?;
    let primary = current_primary(&ctx, name)
        .await?
        .context("no primary in the status")?;
    let pods = [format!("{name}-0"), format!("{name}-1")];
    let restarts_before = [
        ctx.pod_state(&pods[0]).await?.restarts(),
        ctx.pod_state(&pods[1]).await?.restarts(),
    ];
    let writer = Writer::start(&ctx, name).await?;
    let addr = format!("{}:8000", pod_ip(&ctx, &primary).await?);
    let until = Instant::now() + FLOOD;
    let flooding = tokio::spawn(flood(addr.clone(), until));
    // The primary's readiness, once a second, all through the flood.
    let (mut samples, mut unready) = (0, 0);
    while Instant::now() < until {
        samples += 1;
        if !ctx.pod_state(&primary).await?.ready {
            unready += 1;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let opened = flooding.await.context("the flood task")?;
    let failures = writer.failures();
    let reasons = writer.failure_reasons();
    let acks = writer.stop();
    ensure!(
        opened >= SOCKETS,
        "the flood opened only {opened} connections to {addr}"
    );
    ensure!(
        unready == 0,
        "{primary} was not Ready in {unready} of {samples} samples"
    );
    ensure!(failures == 0, "{failures} writes failed: {reasons:?}");
    ensure!(
        current_primary(&ctx, name).await?.as_deref() == Some(primary.as_str()),
        "the primary changed during the flood"
    );
    ensure!(
        last_failover(&ctx, name).await?.is_none(),
        "a failover or switchover was recorded"
    );
    for (pod, before) in pods.iter().zip(restarts_before) {
        let after = ctx.pod_state(pod).await?.restarts();
        ensure!(
            after == before,
            "{pod}'s container restarted during the flood ({before} -> {after})"
        );
    }
    say(format!(
        "{SOCKETS} silent or garbage connections held on {addr} for {}s ({opened} opened as the \
         manager dropped them): {primary} Ready in {samples} of {samples} samples, 0 failovers, \
         0 restarts, {} writes acknowledged with durability required, 0 failed",
        FLOOD.as_secs(),
        acks.len()
    ));
    Ok(())
}
