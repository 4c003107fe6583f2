//! The wire on real pods: a capture of ports 5432 and 8000 on every interface of the node (the
//! pod bridge and its veths) while the application inserts rows holding a marker string through
//! `-rw` and a replica streams them, before and after a switchover (the replica promoted, the
//! old primary streaming from it). The marker crosses the network 0 times in clear. The capture
//! is shown to see the traffic (packets on both ports) and to read payloads: the server name a
//! client sends in clear in its TLS ClientHello is there.

use tusk_e2e::backups::unix_seconds;
use tusk_e2e::capture::Capture;
use tusk_e2e::faults::rejoined;
use tusk_e2e::replication::{app_session, pod_sql, replicated};
use tusk_e2e::switchover::{request_switchover, switched_over};
use tusk_e2e::{Check, Context, Ctx, Result, ensure, say, scenario, until};

/// Copies of the marker per row: many whole ones in any packet that carried the row in clear.
const COPIES: i32 = 40;

/// Inserts rows `rows` holding the marker through `-rw`, as the application role.
async fn insert_markers(
    ctx: &Ctx,
    cluster: &str,
    marker: &str,
    rows: std::ops::RangeInclusive<i32>,
) -> Result {
    let client = app_session(ctx, cluster).await?;
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS markers (n int PRIMARY KEY, body text)")
        .await
        .context("CREATE TABLE markers")?;
    for n in rows {
        client
            .execute(
                "INSERT INTO markers VALUES ($1, repeat($2, $3))",
                &[&n, &marker, &COPIES],
            )
            .await
            .context(format!("inserting marker row {n}"))?;
    }
    Ok(())
}

/// Waits until `pod` has replayed `rows` marker rows.
async fn replayed(ctx: &Ctx, pod: &str, rows: i32) -> Result {
    until(
        format!("{rows} marker rows on {pod}"),
        ctx.timeout(),
        || async {
            let count = pod_sql(ctx, pod, "SELECT count(*) FROM markers").await;
            Ok(match count {
                Ok(c) => Check::when(c == rows.to_string(), format!("{c} rows")),
                Err(e) => Check::Pending(e.to_string()),
            })
        },
    )
    .await
}

#[scenario]
async fn tls_wire_carries_no_plaintext_before_or_after_a_switchover(ctx: Ctx) -> Result {
    ctx.require_real_pods()?;
    let name = "wire";
    let (first, second) = (format!("{name}-0"), format!("{name}-1"));
    ctx.apply(&replicated(name, 2)).await?;
    ctx.wait_ready(&[name]).await?;
    let marker = format!("tusk-wire-marker-{}", unix_seconds());
    let file = std::env::temp_dir().join(format!("{}.pcap", ctx.ns));
    let capture = Capture::start(file, "tcp port 5432 or tcp port 8000").await?;

    insert_markers(&ctx, name, &marker, 1..=20).await?;
    replayed(&ctx, &second, 20).await?;
    request_switchover(&ctx, name, &second).await?;
    switched_over(&ctx, name, &second).await?;
    rejoined(&ctx, &first).await?;
    insert_markers(&ctx, name, &marker, 21..=40).await?;
    replayed(&ctx, &first, 40).await?;

    let captured = capture.stop().await?;
    let client_port = captured.packets("tcp port 5432").await?;
    let status_port = captured.packets("tcp port 8000").await?;
    let server_name = format!("{name}-rw.{}.svc", ctx.ns);
    let names_in_clear = captured.occurrences(server_name.as_bytes());
    let in_clear = captured.occurrences(marker.as_bytes());
    ensure!(
        client_port > 0 && status_port > 0,
        "the capture missed the traffic: {client_port} packets on 5432, {status_port} on 8000"
    );
    ensure!(
        names_in_clear > 0,
        "no ClientHello naming {server_name} in the capture: it did not read payloads"
    );
    ensure!(
        in_clear == 0,
        "the marker crossed the pod network in clear {in_clear} times ({})",
        captured.file.display()
    );
    say(format!(
        "{client_port} packets on 5432 and {status_port} on 8000 captured ({} bytes) while 40 \
         rows with {COPIES} markers each went to the primary and a replica, a switchover \
         between them: the marker 0 times in clear; the server name {names_in_clear} times \
         (ClientHello SNI, the capture reads payloads)",
        captured.bytes.len()
    ));
    std::fs::remove_file(&captured.file).ok();
    Ok(())
}
