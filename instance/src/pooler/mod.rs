//! `tusk-instance pooler`: PID 1 of a pooler pod. It runs PgBouncer, routes every database to
//! the instance the primary Lease names (by that instance's own DNS name, verified against the
//! cluster's CA), and moves the route when the Lease moves: paused through a planned
//! switchover, so that clients see a wait and no error (`decide`). The pooler decides nothing
//! about who is primary; it reads the Lease the instance managers obey.

mod bouncer;
pub mod decide;
pub mod ini;
pub mod metrics;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::sync::watch;

use crate::error::Error;
use bouncer::Bouncer;
use decide::{Action, Observed, Routing};

/// How often the route is looked at while it is moving (paused, or the holder's server not yet
/// out of recovery); at rest a change of the Lease wakes the loop.
const MOVING_TICK: Duration = Duration::from_millis(50);
const RESTING_TICK: Duration = Duration::from_secs(5);

#[derive(clap::Args, Debug, Clone)]
pub struct PoolerArgs {
    #[arg(long, env = "TUSK_NAMESPACE")]
    pub namespace: String,
    /// The primary Lease, `<cluster>-primary`.
    #[arg(long)]
    pub lease: String,
    /// The instances' DNS domain: member `m` is `m.<peer-domain>`.
    #[arg(long)]
    pub peer_domain: String,
    #[arg(long, default_value = "transaction")]
    pub pool_mode: String,
    #[arg(long, default_value_t = 20)]
    pub default_pool_size: u32,
    #[arg(long, default_value_t = 1000)]
    pub max_client_conn: u32,
    #[arg(long, default_value_t = 6432)]
    pub port: u16,
    /// Where `/metrics` is served (plain HTTP: counts only).
    #[arg(long, default_value_t = 9127)]
    pub metrics_port: u16,
    #[arg(long, default_value_t = 5432)]
    pub postgres_port: u16,
    #[arg(long, default_value = "/run/pooler")]
    pub run_dir: PathBuf,
    #[arg(long, default_value = "/etc/tusk-pooler-tls")]
    pub tls_dir: PathBuf,
    /// The PgBouncer executable (looked up on PATH).
    #[arg(long, default_value = "pgbouncer")]
    pub pgbouncer: PathBuf,
    /// How long clients may be held before they are let through to whoever holds the Lease.
    #[arg(long, default_value_t = 30)]
    pub pause_limit_seconds: u64,
    /// The read-only pooler: every database routed to this host (the `-ro` Service) for good,
    /// the Lease not followed.
    #[arg(long)]
    pub route_to: Option<String>,
    /// Tests: `member=host`, comma-separated, instead of `<member>.<peer-domain>`.
    #[arg(long, hide = true, default_value = "")]
    pub hosts: String,
}

impl PoolerArgs {
    fn settings(&self) -> ini::Settings {
        ini::Settings {
            port: self.port,
            run_dir: self.run_dir.display().to_string(),
            tls_dir: self.tls_dir.display().to_string(),
            pool_mode: self.pool_mode.clone(),
            default_pool_size: self.default_pool_size,
            max_client_conn: self.max_client_conn,
            postgres_port: self.postgres_port,
        }
    }

    /// The host name member `member` is dialled by.
    fn host_of(&self, member: &str) -> String {
        if let Some(host) = &self.route_to {
            return host.clone();
        }
        self.hosts
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .find(|(m, _)| m.trim() == member)
            .map(|(_, host)| host.trim().to_owned())
            .unwrap_or_else(|| format!("{member}.{}", self.peer_domain))
    }
}

/// The part of the Lease the pooler follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Primary {
    pub holder: Option<String>,
    pub switchover_to: Option<String>,
}

fn primary_of(lease: Option<Lease>) -> Primary {
    let Some(lease) = lease else {
        return Primary::default();
    };
    let view = crate::role_source::view_of(&lease);
    Primary {
        holder: view.holder,
        switchover_to: view.switchover_to,
    }
}

/// What the read-only pooler "follows": one route that never moves.
const REPLICAS: &str = "replicas";

/// Runs the pooler until PgBouncer ends or the pod is asked to stop.
pub async fn run(args: PoolerArgs) -> Result<(), Error> {
    if args.route_to.is_some() {
        let fixed = Primary {
            holder: Some(REPLICAS.to_owned()),
            switchover_to: None,
        };
        // Kept until the loop ends: a dropped sender would end it.
        let (_route, receiver) = watch::channel(fixed);
        return follow(args, receiver).await;
    }
    let client = kube::Client::try_default()
        .await
        .map_err(|source| Error::Kube {
            name: args.lease.clone(),
            source: Box::new(source),
        })?;
    let api: Api<Lease> = Api::namespaced(client, &args.namespace);
    let lease = crate::follow::named(api, args.lease.clone(), primary_of);
    follow(args, lease).await
}

/// The loop: PgBouncer started once the Lease names a holder, then kept routed to it.
pub async fn follow(args: PoolerArgs, mut lease: watch::Receiver<Primary>) -> Result<(), Error> {
    let limit = Duration::from_secs(args.pause_limit_seconds);
    let first = loop {
        if let Some(holder) = lease.borrow_and_update().holder.clone() {
            break holder;
        }
        tracing::info!(
            lease = args.lease,
            "waiting for the primary Lease to name a holder"
        );
        if lease.changed().await.is_err() {
            return Err(Error::State("the Lease follower ended".to_owned()));
        }
    };
    let mut bouncer = Bouncer::start(&args, &args.host_of(&first))?;
    bouncer.connect_admin(Duration::from_secs(10)).await;
    let activity = Arc::new(Mutex::new(metrics::Activity {
        routed: first.clone(),
        ..metrics::Activity::default()
    }));
    metrics::serve(args.metrics_port, activity.clone(), bouncer.admin_config())
        .await
        .map_err(Error::io(format!(
            "serving metrics on {}",
            args.metrics_port
        )))?;
    let record = |change: &dyn Fn(&mut metrics::Activity)| {
        if let Ok(mut activity) = activity.lock() {
            change(&mut activity);
        }
    };
    let mut routing = Routing {
        routed: Some(first.clone()),
        paused_since: None,
    };
    tracing::info!(route = first, "PgBouncer started and routed");
    let mut tls_seen = tls_stamp(&args.tls_dir);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(Error::io("listening for SIGTERM"))?;
    loop {
        let primary = lease.borrow_and_update().clone();
        let holder_writable = match &primary.holder {
            Some(holder) if primary.holder != routing.routed => {
                writable(&args, &args.host_of(holder)).await
            }
            _ => false,
        };
        let observed = Observed {
            holder: primary.holder.clone(),
            switchover_to: primary.switchover_to.clone(),
            holder_writable,
        };
        match decide::next(&routing, &observed, Instant::now(), limit) {
            Action::Nothing => {}
            Action::Pause => {
                tracing::info!(holder = ?primary.holder, switchover_to = ?primary.switchover_to,
                    "primary moving: holding new transactions");
                bouncer.pause().await;
                routing.paused_since = Some(Instant::now());
                record(&|a| {
                    a.paused = true;
                    a.pauses += 1;
                });
            }
            Action::Route(to) => {
                bouncer.route(&args, &args.host_of(&to)).await?;
                let held = routing.paused_since.take().map(|since| since.elapsed());
                if held.is_some() {
                    bouncer.resume().await;
                }
                tracing::info!(
                    primary = to,
                    held_ms = held.map(|h| h.as_millis() as u64),
                    writable = holder_writable,
                    "routed to the new primary"
                );
                record(&|a| {
                    a.paused = false;
                    a.reroutes += 1;
                    a.routed = to.clone();
                    if let Some(held) = held {
                        a.last_pause_seconds = held.as_secs_f64();
                    }
                });
                routing.routed = Some(to);
            }
            Action::Resume => {
                let held = routing.paused_since.take().map(|since| since.elapsed());
                bouncer.resume().await;
                tracing::info!(
                    held_ms = held.map(|h| h.as_millis() as u64),
                    "resumed where the route was"
                );
                record(&|a| {
                    a.paused = false;
                    if let Some(held) = held {
                        a.last_pause_seconds = held.as_secs_f64();
                    }
                });
            }
        }
        let moving = primary.holder != routing.routed || routing.paused_since.is_some();
        if !moving {
            // A renewed certificate (or a CA rotation step) reaches PgBouncer only when it
            // reads its files again: at rest, never in the middle of a move.
            let stamp = tls_stamp(&args.tls_dir);
            if stamp != tls_seen {
                tracing::info!("the pooler's certificate files changed: PgBouncer reloads them");
                bouncer.reload().await;
                tls_seen = stamp;
            }
        }
        let tick = if moving { MOVING_TICK } else { RESTING_TICK };
        tokio::select! {
            changed = lease.changed() => {
                if changed.is_err() {
                    return Err(Error::State("the Lease follower ended".to_owned()));
                }
            }
            _ = tokio::time::sleep(tick) => {}
            status = bouncer.exited() => {
                return Err(Error::State(format!("PgBouncer exited: {status}")));
            }
            _ = terminate.recv() => {
                tracing::info!("asked to stop: PgBouncer lets transactions in flight finish");
                return bouncer.shut_down().await;
            }
        }
    }
}

/// A fingerprint of the certificate files as they are now (`None` when one cannot be read).
fn tls_stamp(dir: &std::path::Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for file in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::read(dir.join(file)).ok()?.hash(&mut hasher);
    }
    Some(hasher.finish())
}

/// Whether the server at `host` accepts writes (is out of recovery), asked as `tusk_pooler`
/// with its certificate over TLS verified by name: a failed check is a no.
async fn writable(args: &PoolerArgs, host: &str) -> bool {
    let check = async {
        let cert = args.tls_dir.join("tls.crt");
        let key = args.tls_dir.join("tls.key");
        let identity = tusk_pgtls::Identity {
            cert: &cert,
            key: &key,
        };
        let tls = tusk_pgtls::verifying_as(&args.tls_dir.join("ca.crt"), Some(identity))
            .map_err(|e| e.to_string())?;
        let mut config = tokio_postgres::Config::new();
        config
            .host(host)
            .port(args.postgres_port)
            .user(tusk_contract::roles::POOLER_USER)
            .dbname("postgres")
            .application_name("tusk-pooler")
            .ssl_mode(tokio_postgres::config::SslMode::Require)
            .connect_timeout(Duration::from_secs(2));
        let (client, connection) = config.connect(tls).await.map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let row = client
            .query_one("SELECT pg_catalog.pg_is_in_recovery()", &[])
            .await
            .map_err(|e| e.to_string())?;
        Ok::<bool, String>(!row.get::<_, bool>(0))
    };
    match tokio::time::timeout(Duration::from_secs(3), check).await {
        Ok(Ok(writable)) => writable,
        Ok(Err(e)) => {
            tracing::debug!(host, error = e, "the new primary cannot be asked yet");
            false
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_changed_certificate_file_changes_the_stamp() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(super::tls_stamp(dir.path()), None);
        for file in ["tls.crt", "tls.key", "ca.crt"] {
            std::fs::write(dir.path().join(file), file).unwrap();
        }
        let first = super::tls_stamp(dir.path());
        assert!(first.is_some());
        assert_eq!(super::tls_stamp(dir.path()), first);
        std::fs::write(dir.path().join("tls.crt"), "renewed").unwrap();
        assert_ne!(super::tls_stamp(dir.path()), first);
    }
}
