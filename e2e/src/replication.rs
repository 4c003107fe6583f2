//! What the replication scenarios need: a replicated cluster, SQL in one chosen pod, and a
//! writer that appends numbered rows through the `-rw` Service (or straight to one pod) and
//! records every acknowledged commit with its timeline and time, so a fault's write gap and any
//! lost row can be measured.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::Api;
use tokio::task::JoinHandle;
use tusk::crd::Failover;
use tusk_testkit::PSQL_SCRIPT;

use crate::{Context, Ctx, Result};

/// A PostgreSQL with `instances` instances.
pub fn replicated(name: &str, instances: u8) -> String {
    format!(
        "apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {{name: {name}}}
spec:
  version: \"18\"
  instances: {instances}
  storage: {{size: 1Gi}}
"
    )
}

/// [`replicated`] with synchronous replication to one of the replicas (`ANY 1`) at
/// `durability` (`required` or `preferred`).
pub fn synchronous(name: &str, instances: u8, durability: &str) -> String {
    format!(
        "{}  replication: {{synchronous: {{number: 1, durability: {durability}}}}}\n",
        replicated(name, instances)
    )
}

/// One acknowledged insert.
#[derive(Clone, Copy, Debug)]
pub struct Ack {
    pub n: i64,
    pub timeline: i64,
    pub at: Instant,
}

/// A writer appending rows `1, 2, …` to table `writes` through the `-rw` Service, or rows
/// from [`PINNED_FIRST`] on straight to one pod.
pub struct Writer {
    acks: Arc<Mutex<Vec<Ack>>>,
    /// Attempts that failed: an insert not acknowledged, or a session that could not be opened.
    failures: Arc<AtomicUsize>,
    /// Why the first [`KEPT_REASONS`] attempts failed, for a scenario that claims none do.
    reasons: Reasons,
    task: JoinHandle<()>,
}

/// How many failure reasons a writer keeps.
const KEPT_REASONS: usize = 8;

/// The first few failures of a writer: when, and why.
#[derive(Clone, Default)]
struct Reasons(Arc<Mutex<Vec<String>>>);

impl Reasons {
    fn record(&self, started: Instant, n: i64, why: &str) {
        if let Ok(mut kept) = self.0.lock()
            && kept.len() < KEPT_REASONS
        {
            let at = started.elapsed().as_secs_f64();
            kept.push(format!("row {n} at {at:.1}s: {why}"));
        }
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Writer {
    /// Starts writing to cluster `cluster` as its application role, over the `-rw` Service's
    /// cluster IP (the host routes cluster IPs on the e2e node).
    pub async fn start(ctx: &Ctx, cluster: &str) -> Result<Self> {
        let ip = service_ip(ctx, &format!("{cluster}-rw")).await?;
        let name = format!("{cluster}-rw.{}.svc", ctx.ns);
        Self::spawn(app_target(ctx, cluster, &name, &ip).await?, 0).await
    }

    /// Starts writing straight to pod `pod` of cluster `cluster` (its pod IP, never through a
    /// Service): what a client that resolved the primary once would keep doing. Its rows are
    /// numbered from [`PINNED_FIRST`], apart from [`Writer::start`]'s in the same table.
    pub async fn pinned(ctx: &Ctx, cluster: &str, pod: &str) -> Result<Self> {
        let ip = pod_ip(ctx, pod).await?;
        let name = format!("{pod}.{cluster}-hl.{}.svc", ctx.ns);
        Self::spawn(
            app_target(ctx, cluster, &name, &ip).await?,
            PINNED_FIRST - 1,
        )
        .await
    }

    /// Starts writing through cluster `cluster`'s pooler (`<cluster>-pooler-rw`), waiting up
    /// to 40 s for each insert: a transaction the pooler holds through a switchover is a
    /// wait, and only an error or no answer at all counts as a failure.
    pub async fn through_pooler(ctx: &Ctx, cluster: &str) -> Result<Self> {
        let service = format!("{cluster}-pooler-rw");
        let ip = service_ip(ctx, &service).await?;
        let name = format!("{service}.{}.svc", ctx.ns);
        let mut target = app_target(ctx, cluster, &name, &ip).await?;
        // PgBouncer 1.18 offers clients no channel binding; the name is verified all the same.
        target.binding = false;
        target.patience = Duration::from_secs(40);
        target.simple = true;
        Self::spawn(target, 0).await
    }

    /// [`Writer::start`] as a new client at each write: a fresh `verify-full` session per
    /// row, verified against the CA that ConfigMap `<cluster>-ca.crt` publishes at that
    /// moment (read again each time), as a client that reconnects and follows the Secret would.
    /// Through a CA rotation, a failure here is a client the server's chain did not satisfy.
    pub async fn fresh_sessions(ctx: &Ctx, cluster: &str) -> Result<Self> {
        let ip = service_ip(ctx, &format!("{cluster}-rw")).await?;
        let name = format!("{cluster}-rw.{}.svc", ctx.ns);
        let first = app_target(ctx, cluster, &name, &ip).await?;
        let (client, after) = writable_session_soon(&first, 0).await?;
        drop(client);
        let acks = Arc::new(Mutex::new(Vec::new()));
        let recorded = acks.clone();
        let failures = Arc::new(AtomicUsize::new(0));
        let failed = failures.clone();
        let reasons = Reasons::default();
        let why = reasons.clone();
        let (ctx, cluster) = (ctx.clone(), cluster.to_owned());
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut n = after;
            loop {
                // The Secret read from the API server is the harness's, not a write: a read
                // that fails (an API server slow on a loaded machine) is tried again.
                let target = match app_target(&ctx, &cluster, &name, &ip).await {
                    Ok(target) => target,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                n += 1;
                let written = async {
                    let client = connect(&target).await?;
                    let insert = "INSERT INTO writes VALUES ($1, 0) RETURNING timeline";
                    let row = tokio::time::timeout(
                        Duration::from_secs(2),
                        client.query_one(insert, &[&n]),
                    )
                    .await
                    .context("no answer")?
                    .context("the insert")?;
                    Result::Ok(row.get::<_, i64>(0))
                };
                match written.await {
                    Ok(timeline) => {
                        let ack = Ack {
                            n,
                            timeline,
                            at: Instant::now(),
                        };
                        if let Ok(mut acks) = recorded.lock() {
                            acks.push(ack);
                        }
                    }
                    Err(e) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        why.record(started, n, &format!("{e:#}"));
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Ok(Self {
            acks,
            failures,
            reasons,
            task,
        })
    }

    /// Writes rows from `after + 1` on with `config`, past the rows an earlier writer of the
    /// same numbering left in the table.
    async fn spawn(config: Target, after: i64) -> Result<Self> {
        let (client, after) = writable_session_soon(&config, after).await?;
        let acks = Arc::new(Mutex::new(Vec::new()));
        let recorded = acks.clone();
        let failures = Arc::new(AtomicUsize::new(0));
        let failed = failures.clone();
        let reasons = Reasons::default();
        let why = reasons.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut n = after;
            let mut session = Some(client);
            loop {
                let client = match session.take() {
                    Some(client) => client,
                    None => match connect(&config).await {
                        Ok(client) => client,
                        Err(e) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            why.record(started, n + 1, &format!("{e:#}"));
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    },
                };
                n += 1;
                // The timeline of the WAL the row went to: the first 8 hex digits of its file.
                let insert = "INSERT INTO writes VALUES ($1, ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint) RETURNING timeline";
                let result =
                    tokio::time::timeout(config.patience, insert_row(&client, &config, insert, n))
                        .await;
                // Not acknowledged (an error or no answer): the row may or may not exist; it
                // is never counted, and the next attempt opens a new session.
                let row = match result {
                    Ok(Ok(timeline)) => Some(timeline),
                    Ok(Err(e)) => {
                        why.record(started, n, &db_error(&e));
                        None
                    }
                    Err(_) => {
                        let waited = config.patience.as_secs();
                        why.record(started, n, &format!("no answer within {waited}s"));
                        None
                    }
                };
                if let Some(timeline) = row {
                    let ack = Ack {
                        n,
                        timeline,
                        at: Instant::now(),
                    };
                    if let Ok(mut acks) = recorded.lock() {
                        acks.push(ack);
                    }
                    session = Some(client);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Ok(Self {
            acks,
            failures,
            reasons,
            task,
        })
    }

    /// Attempts that failed so far (not acknowledged, or no session to make them in).
    pub fn failures(&self) -> usize {
        self.failures.load(Ordering::Relaxed)
    }

    /// Why the first few attempts failed (row, seconds since the writer started, the error).
    pub fn failure_reasons(&self) -> Vec<String> {
        self.reasons.all()
    }

    /// Every acknowledgement so far.
    pub fn acks(&self) -> Vec<Ack> {
        self.acks.lock().map(|a| a.clone()).unwrap_or_default()
    }

    /// Waits until a row is acknowledged after `since`.
    pub async fn wait_ack_after(&self, since: Instant, timeout: Duration) -> Result<Ack> {
        crate::until("a write acknowledged after the fault", timeout, || async {
            let acks = self.acks();
            Ok(match acks.iter().find(|a| a.at > since) {
                Some(ack) => crate::Check::Done(*ack),
                None => crate::Check::Pending(format!(
                    "{} acknowledged, none after the fault",
                    acks.len()
                )),
            })
        })
        .await
    }

    /// Stops writing; the acknowledgements.
    pub fn stop(self) -> Vec<Ack> {
        self.task.abort();
        self.acks()
    }
}

/// The first row of a [`Writer::pinned`].
pub const PINNED_FIRST: i64 = 1_000_000_001;

/// The write gap of a fault injected at `fault`: the longest time between two consecutive
/// acknowledgements from the last one before `fault` on. (The fault lands a little after
/// `fault`, when `kubectl exec` or the API server has acted, so "the first acknowledgement
/// after `fault`" can precede it; a healthy writer acknowledges every few tens of ms.)
pub fn write_gap(acks: &[Ack], fault: Instant) -> Option<Duration> {
    let first = acks.iter().rposition(|a| a.at <= fault)?;
    acks[first..]
        .windows(2)
        .map(|pair| pair[1].at.duration_since(pair[0].at))
        .max()
}

/// Acknowledged rows missing from `present` (the `n`s the new primary holds).
pub fn lost(acks: &[Ack], present: &[i64]) -> Vec<i64> {
    acks.iter()
        .map(|a| a.n)
        .filter(|n| present.binary_search(n).is_err())
        .collect()
}

/// Whether a commit on a timeline came after the first commit on a newer one (a fork).
pub fn forked(acks: &[Ack]) -> Option<(Ack, Ack)> {
    acks.windows(2)
        .find(|pair| pair[1].timeline < pair[0].timeline)
        .map(|pair| (pair[0], pair[1]))
}

/// A session as the application role through the `-rw` Service (verify-full, channel
/// binding) on a server out of recovery, tried again for up to 60 s. Right after a switchover
/// kube-proxy can still send a new connection to the old primary (it applies a moved endpoint
/// at its next sync, at most once a second in iptables mode), which is by then back as a
/// read-only standby: an application's write fails there (SQLSTATE 25006) and it reconnects,
/// as this does. Seen on the node (tls_wire.rs): a connection 1.0 s after the Lease moved
/// reached the old primary, serving read-only as a standby for 0.3 s by then.
pub async fn app_session(ctx: &Ctx, cluster: &str) -> Result<tokio_postgres::Client> {
    let ip = service_ip(ctx, &format!("{cluster}-rw")).await?;
    let name = format!("{cluster}-rw.{}.svc", ctx.ns);
    let target = app_target(ctx, cluster, &name, &ip).await?;
    crate::until(
        format!("a session on {cluster}'s primary through {name}"),
        Duration::from_secs(60),
        || async {
            let client = match connect(&target).await {
                Ok(client) => client,
                Err(e) => return Ok(crate::Check::Pending(format!("{e:#}"))),
            };
            Ok(
                match client.query_one("SELECT pg_is_in_recovery()", &[]).await {
                    Ok(row) if !row.get::<_, bool>(0) => crate::Check::Done(client),
                    Ok(_) => crate::Check::Pending("reached a server in recovery".to_owned()),
                    Err(e) => crate::Check::Pending(format!("pg_is_in_recovery(): {e}")),
                },
            )
        },
    )
    .await
}

/// A session as the application role through pooler Service `service` (`<cluster>-pooler-rw`
/// or `-pooler-ro`), verified by its name (PgBouncer 1.18 offers no channel binding), tried
/// again for up to 60 s.
pub async fn pooler_session(
    ctx: &Ctx,
    cluster: &str,
    service: &str,
) -> Result<tokio_postgres::Client> {
    let ip = service_ip(ctx, service).await?;
    let name = format!("{service}.{}.svc", ctx.ns);
    let mut target = app_target(ctx, cluster, &name, &ip).await?;
    target.binding = false;
    connect_soon(&target).await
}

/// The newest `n` of table `writes` on `primary`: read in its own session, so every row it
/// counts committed before the next statement of the scenario starts.
pub async fn newest_row(ctx: &Ctx, primary: &str) -> Result<i64> {
    let max = pod_sql(ctx, primary, "SELECT coalesce(max(n), 0) FROM writes").await?;
    Ok(max.parse()?)
}

/// A point-in-time restore target on `primary` between two reads of the newest row, each in
/// its own session: `(before, time, after)`, rows up to `before` committed before the time
/// (RFC 3339 with `Z`, as the samples write it), rows after `after` after it.
pub async fn time_between_rows(ctx: &Ctx, primary: &str) -> Result<(i64, String, i64)> {
    let before = newest_row(ctx, primary).await?;
    let time = pod_sql(
        ctx,
        primary,
        r#"SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"#,
    )
    .await?;
    let after = newest_row(ctx, primary).await?;
    Ok((before, time, after))
}

/// Every `n` in table `writes`, sorted, read through the `-rw` Service.
pub async fn rows(ctx: &Ctx, cluster: &str) -> Result<Vec<i64>> {
    let client = app_session(ctx, cluster).await?;
    let rows = client
        .query("SELECT n FROM writes ORDER BY n", &[])
        .await
        .context("SELECT n FROM writes")?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// `sql` as the superuser in pod `pod` (over its socket) on the application database (`app`,
/// where the writer's table is), unaligned and tuples only.
pub async fn pod_sql(ctx: &Ctx, pod: &str, sql: &str) -> Result<String> {
    let mut psql = vec!["psql", "-U", "postgres", "-d", "app"];
    psql.extend(PSQL_SCRIPT);
    psql.extend(["-c", sql]);
    ctx.exec_postgres(pod, &psql)
        .await
        .map(|out| out.trim().to_owned())
}

/// The pod that holds the primary Lease, as the cluster's status reports it.
pub async fn current_primary(ctx: &Ctx, cluster: &str) -> Result<Option<String>> {
    let pg = ctx.postgresql_in(&ctx.ns, cluster).await?;
    Ok(pg.status.and_then(|s| s.current_primary))
}

/// The cluster's record of its newest failover or switchover (`status.lastFailover`).
pub async fn last_failover(ctx: &Ctx, cluster: &str) -> Result<Option<Failover>> {
    let pg = ctx.postgresql_in(&ctx.ns, cluster).await?;
    Ok(pg.status.and_then(|s| s.last_failover))
}

/// How many copies of row `n` of table `writes` pod `pod` holds: "1" once it has the row, "0"
/// before it has replayed it.
pub async fn row_count(ctx: &Ctx, pod: &str, n: i64) -> Result<String> {
    let sql = format!("SELECT count(*) FROM writes WHERE n = {n}");
    pod_sql(ctx, pod, &sql).await
}

/// The cluster IP of Service `name` (the host reaches it through the node's kube-proxy).
pub async fn service_ip(ctx: &Ctx, name: &str) -> Result<String> {
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    services
        .get(name)
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context(format!("{name} has no cluster IP"))
}

/// The IP of pod `pod` (the host reaches the pod network on the e2e node).
pub async fn pod_ip(ctx: &Ctx, pod: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    pods.get(pod)
        .await?
        .status
        .and_then(|s| s.pod_ip)
        .context(format!("pod {pod} has no IP"))
}

/// The application role's connection to `host`, from the `<cluster>-app` Secret.
async fn app_target(ctx: &Ctx, cluster: &str, name: &str, ip: &str) -> Result<Target> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let secret = secrets.get(&format!("{cluster}-app")).await?;
    let field = |key: &str| -> Result<String> {
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .context(format!("{key} in {cluster}-app"))?;
        String::from_utf8(data.0.clone()).context(key.to_owned())
    };
    let mut config = tokio_postgres::Config::new();
    config
        .host(name)
        .hostaddr(ip.parse().context(format!("address {ip:?}"))?)
        .port(5432)
        .user(field("username")?)
        .password(field("password")?)
        .dbname(field("dbname")?)
        .connect_timeout(Duration::from_secs(1));
    // As an application would: the cluster's CA as published (no key beside it), the name
    // verified, channel binding.
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    let published = format!("{cluster}-ca.crt");
    let ca = (config_maps.get(&published).await?.data)
        .and_then(|mut d| d.remove("ca.crt"))
        .context(format!("ca.crt in ConfigMap {published}"))?;
    let tls = tusk_pgtls::verifying_pem(ca.as_bytes(), &format!("in ConfigMap {published}"))?;
    Ok(Target {
        config,
        tls,
        binding: true,
        patience: Duration::from_secs(2),
        simple: false,
    })
}

/// Where a writer connects: the server's name and address, and the CA that verifies it.
#[derive(Clone)]
struct Target {
    config: tokio_postgres::Config,
    tls: tusk_pgtls::MakeRustlsConnect,
    /// Channel binding required (the servers offer it; PgBouncer does not).
    binding: bool,
    /// How long an insert may wait for its answer before it counts as failed.
    patience: Duration,
    /// Inserts in the simple query protocol: through PgBouncer 1.18 in transaction mode a
    /// named prepared statement may meet another server connection than the one it was
    /// prepared on ("prepared statement does not exist"), as the pooler's page says.
    simple: bool,
}

/// Row `n` inserted with `insert`; the timeline it returns.
async fn insert_row(
    client: &tokio_postgres::Client,
    target: &Target,
    insert: &str,
    n: i64,
) -> std::result::Result<i64, tokio_postgres::Error> {
    if !target.simple {
        return client.query_one(insert, &[&n]).await.map(|row| row.get(0));
    }
    let sql = insert.replace("$1", &n.to_string());
    let messages = client.simple_query(&sql).await?;
    Ok(messages
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
            _ => None,
        })
        .unwrap_or_default())
}

/// [`writable_session`], tried again for up to 60 s: right after a switchover `-rw` may still
/// lead to the demoted primary (read-only), and right after a new Service's endpoints appear
/// the node's proxy may not route to them yet (connection refused, seen in CI on real pods).
async fn writable_session_soon(
    config: &Target,
    after: i64,
) -> Result<(tokio_postgres::Client, i64)> {
    crate::until(
        "a writable session",
        Duration::from_secs(60),
        || async move {
            Ok(match writable_session(config, after).await {
                Ok(session) => crate::Check::Done(session),
                Err(e) => crate::Check::Pending(format!("{e:#}")),
            })
        },
    )
    .await
}

/// A session that created the table `writes` (if needed), and the last row of the numbering
/// that starts after `after`. A writer started again on the same cluster (the benchmark starts
/// one per trial) continues after it: from `after + 1` again, every insert would fail on the
/// primary key until it passed the earlier rows.
async fn writable_session(config: &Target, after: i64) -> Result<(tokio_postgres::Client, i64)> {
    let client = connect(config).await?;
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS writes (n bigint PRIMARY KEY, timeline bigint)")
        .await
        .map_err(|e| crate::Failure::Fail(format!("CREATE TABLE writes: {}", db_error(&e))))?;
    let last: i64 = client
        .query_one(
            "SELECT coalesce(max(n), $1) FROM writes WHERE n > $1 AND n < $1 + $2",
            &[&after, &(PINNED_FIRST - 1)],
        )
        .await
        .map_err(|e| crate::Failure::Fail(format!("the last row written: {}", db_error(&e))))?
        .get(0);
    Ok((client, last))
}

/// The server's own message when there is one ("db error" alone says nothing).
fn db_error(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map_or_else(|| e.to_string(), |db| db.message().to_owned())
}

/// Connects, trying again for up to 60 s: right after a fault the Service may route nowhere for
/// a moment (a restarted primary is unready for a probe or two after it took writes again).
async fn connect_soon(config: &Target) -> Result<tokio_postgres::Client> {
    crate::until("a connection", Duration::from_secs(60), || async {
        Ok(match connect(config).await {
            Ok(client) => crate::Check::Done(client),
            Err(e) => crate::Check::Pending(format!("{e:#}")),
        })
    })
    .await
}

/// Connects, giving up after 2 s: `connect_timeout` bounds only the TCP connect, and the
/// startup handshake with a frozen server would otherwise wait forever.
async fn connect(target: &Target) -> Result<tokio_postgres::Client> {
    let connect = async {
        if target.binding {
            return tusk_pgtls::connect(&target.config, Some(target.tls.clone()), "writer").await;
        }
        let mut config = target.config.clone();
        config.ssl_mode(tokio_postgres::config::SslMode::Require);
        let (client, connection) = config.connect(target.tls.clone()).await?;
        tokio::spawn(connection);
        Ok(client)
    };
    let client = tokio::time::timeout(Duration::from_secs(2), connect)
        .await
        .context("connecting: no answer within 2s")?
        .context("connecting")?;
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(n: i64, timeline: i64, at: Instant) -> Ack {
        Ack { n, timeline, at }
    }

    #[test]
    fn the_gap_spans_the_last_ack_before_the_fault_to_the_first_after() {
        let t0 = Instant::now();
        let acks = [
            ack(1, 1, t0),
            ack(2, 1, t0 + Duration::from_secs(1)),
            ack(3, 2, t0 + Duration::from_secs(5)),
        ];
        let fault = t0 + Duration::from_millis(1500);
        assert_eq!(write_gap(&acks, fault), Some(Duration::from_secs(4)));
        // The fault took effect after an acknowledgement that followed its injection.
        let late = [
            ack(1, 1, t0),
            ack(2, 1, t0 + Duration::from_millis(100)),
            ack(3, 1, t0 + Duration::from_millis(3100)),
        ];
        assert_eq!(
            write_gap(&late, t0 + Duration::from_millis(50)),
            Some(Duration::from_secs(3))
        );
        assert_eq!(lost(&acks, &[1, 3]), [2]);
        assert!(forked(&acks).is_none());
        let forked_acks = [ack(1, 1, t0), ack(2, 2, t0), ack(3, 1, t0)];
        assert_eq!(forked(&forked_acks).map(|(a, b)| (a.n, b.n)), Some((2, 3)));
    }
}
