//! Where the manager learns its role: the Lease in production (read, and renewed while this
//! pod holds it), or a JSON file standing in for it in tests. A background task polls the
//! source and publishes what it saw and when the last successful renew *started* (so network
//! time counts against the holder, not for it). During a switchover it polls faster, and the
//! holder releases the Lease instead of renewing it once the supervisor has demoted it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use tusk_contract::lease::{
    self as contract, FINAL_LSN, HOLDER_ADDRESS, MEMBERS, RELEASE_REQUESTED, SWITCHOVER_TO,
    SYSTEM_IDENTIFIER, address_of, holder_address,
};

use crate::decide::LeaseView;
use crate::error::Error;

/// How much faster the Lease is polled while a switchover is in progress: the target learns it
/// holds the Lease within a fifth of the renew interval, which is most of the write gap.
const SWITCHOVER_POLL_DIVISOR: u32 = 5;

/// What the supervisor reads: the Lease as last seen, the start of the last good renew, when the
/// Lease was last read at all, and when the holder was last seen renewing it.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub lease: Option<LeaseView>,
    pub last_renew: Option<Instant>,
    /// The start of the last successful read (or renew): an instance that cannot read the
    /// Lease does not know whether it was handed it, and does not serve.
    pub last_read: Option<Instant>,
    /// When a poll last found the holder's renew time changed: the holder is alive (a standby
    /// that does not stream while this is recent is broken, not waiting for a failover).
    pub holder_renewed: Option<Instant>,
    /// The Lease's renew time as last seen, to notice the next renewal.
    pub renew_time: Option<String>,
}

/// What the supervisor asks of the role source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intent {
    /// Demoted in a switchover: release the Lease naming this final LSN.
    pub release_lsn: Option<String>,
    /// Do not renew (a holder without usable data, or asked to release): the Lease expires and
    /// the operator hands it on.
    pub abstain: bool,
    /// The local database's system identifier, recorded on the Lease by its holder if the
    /// Lease has none yet.
    pub system_identifier: Option<String>,
}

/// One poll's outcome: the Lease, whether this pod renewed it, and a token that changes
/// whenever the holder renews (the Lease's renew time).
pub struct Poll {
    pub view: LeaseView,
    pub renewed: bool,
    pub renewal: Option<String>,
}

pub enum RoleSource {
    Lease {
        api: Box<Api<Lease>>,
        name: String,
        /// This pod's IP, published while it holds the Lease.
        address: Option<String>,
    },
    File {
        path: PathBuf,
    },
}

impl RoleSource {
    pub fn lease(
        client: kube::Client,
        namespace: &str,
        name: &str,
        address: Option<String>,
    ) -> RoleSource {
        RoleSource::Lease {
            api: Box::new(Api::namespaced(client, namespace)),
            name: name.to_string(),
            address,
        }
    }

    async fn poll(&self, me: &str, intent: &Intent) -> Result<Poll, Error> {
        match self {
            RoleSource::Lease { api, name, address } => {
                let holder = Holder {
                    me,
                    address: address.as_deref(),
                };
                poll_lease(api, name, holder, intent).await
            }
            RoleSource::File { path } => poll_file(path, me, intent).await,
        }
    }

    /// Changes of the Lease that move a role (its holder, a switchover's target, a release
    /// request), followed through a watch so the next poll happens at once rather than up to
    /// a renew interval later; the file has none.
    fn changes(&self) -> Option<watch::Receiver<Turn>> {
        match self {
            RoleSource::Lease { api, name, .. } => {
                Some(crate::follow::named((**api).clone(), name.clone(), turn_of))
            }
            RoleSource::File { .. } => None,
        }
    }
}

/// The parts of the Lease a poll must see at once: who holds it, whom a switchover hands it
/// to, and whether a release is asked for. Renewals do not change it, so they wake no one.
type Turn = Option<(Option<String>, Option<String>, Option<String>)>;

fn turn_of(lease: Option<Lease>) -> Turn {
    let view = view_of(&lease?);
    Some((view.holder, view.switchover_to, view.release_requested))
}

/// The polling pod: its name and, when known, its IP.
#[derive(Clone, Copy)]
struct Holder<'a> {
    me: &'a str,
    address: Option<&'a str>,
}

/// Whether the holder `me` of the Lease seen as `view` gives it up now: it was asked to switch
/// over to another member and the supervisor has demoted it (`release`: the final LSN).
fn releases(view: &LeaseView, me: &str, release: Option<&str>) -> bool {
    release.is_some()
        && view.holder.as_deref() == Some(me)
        && view
            .switchover_to
            .as_deref()
            .is_some_and(|target| target != me)
}

/// Reads the Lease and, when this pod holds it, renews it with the read `resourceVersion` (a
/// concurrent handover makes the update fail instead of being overwritten), publishing its
/// address and the system identifier if the Lease does not have them yet — or, demoted in a
/// switchover, releases it: no holder, and the final LSN for the operator. An abstaining holder
/// only reads.
async fn poll_lease(
    api: &Api<Lease>,
    name: &str,
    pod: Holder<'_>,
    intent: &Intent,
) -> Result<Poll, Error> {
    let release = intent.release_lsn.as_deref();
    let me = pod.me;
    let kube_error = |source| Error::Kube {
        name: name.to_string(),
        source: Box::new(source),
    };
    let mut lease = api.get(name).await.map_err(kube_error)?;
    let mut view = view_of(&lease);
    let holder = view.holder.as_deref() == Some(me);
    if let (true, Some(lsn)) = (releases(&view, me, release), release) {
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = None;
        lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(FINAL_LSN.to_string(), lsn.to_string());
        api.replace(name, &PostParams::default(), &lease)
            .await
            .map_err(kube_error)?;
        tracing::info!(final_lsn = lsn, "released the Lease for the switchover");
        view.holder = None;
        return Ok(Poll {
            view,
            renewed: false,
            renewal: None,
        });
    }
    let renewal = renewal_of(&lease);
    if holder && !intent.abstain {
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        if let (None, Some(id)) = (&view.system_identifier, &intent.system_identifier) {
            lease
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(SYSTEM_IDENTIFIER.to_string(), id.clone());
            view.system_identifier = Some(id.clone());
        }
        if let Some(ip) = pod.address
            && view.holder_address.as_deref() != Some(ip)
        {
            lease
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(HOLDER_ADDRESS.to_string(), holder_address(me, ip));
            view.holder_address = Some(ip.to_string());
        }
        api.replace(name, &PostParams::default(), &lease)
            .await
            .map_err(kube_error)?;
    }
    Ok(Poll {
        view,
        renewed: holder && !intent.abstain,
        renewal,
    })
}

/// The Lease's renew time, as written.
fn renewal_of(lease: &Lease) -> Option<String> {
    let time = lease.spec.as_ref()?.renew_time.as_ref()?;
    serde_json::to_string(time).ok()
}

pub fn view_of(lease: &Lease) -> LeaseView {
    let spec = lease.spec.clone().unwrap_or_default();
    let annotation = |key: &str| {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .filter(|value| !value.is_empty())
            .cloned()
    };
    let holder = spec.holder_identity.filter(|h| !h.is_empty());
    let holder_address =
        annotation(HOLDER_ADDRESS).and_then(|value| address_of(&value, holder.as_deref()?));
    LeaseView {
        holder,
        // The contract's duration, never `leaseDurationSeconds` as read: any member may write
        // the Lease, and a value of 1 would leave no time to fence.
        duration: contract_duration(),
        instances: annotation(MEMBERS)
            .map(|list| contract::members(&list))
            .unwrap_or_default(),
        switchover_to: annotation(SWITCHOVER_TO),
        holder_address,
        system_identifier: annotation(SYSTEM_IDENTIFIER),
        release_requested: annotation(RELEASE_REQUESTED),
    }
}

fn contract_duration() -> Duration {
    Duration::from_secs(u64::from(contract::DURATION_SECONDS))
}

/// The test stand-in: `{"holder": "a", "instances": "a,b", "leaseDurationSeconds": 6,
/// "renew": true, "switchoverTo": "b"}`; `renew: false` (or an unreadable file) is a renew that
/// fails. A release rewrites the file with no holder and `finalLsn`.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct FileLease {
    #[serde(default)]
    holder: String,
    #[serde(default)]
    instances: String,
    #[serde(default = "six")]
    lease_duration_seconds: u64,
    #[serde(default = "yes")]
    renew: bool,
    #[serde(default)]
    switchover_to: String,
    #[serde(default)]
    final_lsn: String,
    /// `tusk.dev/holder-address`: `<pod>=<ip>`.
    #[serde(default)]
    holder_address: String,
    /// `tusk.dev/system-identifier`.
    #[serde(default)]
    system_identifier: String,
    /// `tusk.dev/release-requested`.
    #[serde(default)]
    release_requested: String,
}

fn six() -> u64 {
    6
}

fn yes() -> bool {
    true
}

async fn poll_file(path: &PathBuf, me: &str, intent: &Intent) -> Result<Poll, Error> {
    let release = intent.release_lsn.as_deref();
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(Error::io(format!("reading {}", path.display())))?;
    let mut file: FileLease = serde_json::from_str(&text)
        .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    let holder = Some(file.holder.clone()).filter(|h| !h.is_empty());
    let holder_address = holder
        .as_deref()
        .and_then(|holder| address_of(&file.holder_address, holder));
    let not_empty = |value: &str| Some(value.to_string()).filter(|v| !v.is_empty());
    let mut view = LeaseView {
        holder,
        duration: contract_duration(),
        instances: contract::members(&file.instances),
        switchover_to: not_empty(&file.switchover_to),
        holder_address,
        system_identifier: not_empty(&file.system_identifier),
        release_requested: not_empty(&file.release_requested),
    };
    if let (true, Some(lsn)) = (releases(&view, me, release), release) {
        file.holder.clear();
        file.final_lsn = lsn.to_string();
        let text = serde_json::to_string(&file).map_err(|e| Error::Config(e.to_string()))?;
        tokio::fs::write(path, text)
            .await
            .map_err(Error::io(format!("writing {}", path.display())))?;
        view.holder = None;
        return Ok(Poll {
            view,
            renewed: false,
            renewal: None,
        });
    }
    // The stand-in never writes the system identifier: the tests set it, and a write here
    // could race theirs.
    let holder = view.holder.as_deref() == Some(me) && !intent.abstain;
    if holder && !file.renew {
        return Err(Error::State("renew refused by the role file".into()));
    }
    // The stand-in's holder renews whenever `renew` is true: a token that changes every poll.
    let renewal = file.renew.then(|| format!("{:?}", Instant::now()));
    Ok(Poll {
        view,
        renewed: holder,
        renewal,
    })
}

/// Polls `source` every `interval` (a fifth of it during a switchover), and at once when the
/// Lease changes hands or the supervisor's intent changes (a release), and publishes the
/// result. The returned sender carries the supervisor's [`Intent`]: a release (the final LSN
/// once it has demoted the holder in a switchover, honoured only while the Lease still asks for
/// one), abstaining from renewals, and the system identifier to record.
pub fn spawn(
    source: RoleSource,
    me: String,
    interval: Duration,
) -> (watch::Receiver<Observed>, watch::Sender<Intent>) {
    let (tx, rx) = watch::channel(Observed::default());
    let (intent_tx, mut intent_rx) = watch::channel(Intent::default());
    tokio::spawn(async move {
        let mut changes = source.changes();
        let mut observed = Observed::default();
        let mut failing = false;
        loop {
            let started = Instant::now();
            let intent = intent_rx.borrow_and_update().clone();
            let poll = source.poll(&me, &intent);
            match tokio::time::timeout(interval * 2, poll).await {
                Ok(Ok(poll)) => {
                    if failing {
                        tracing::info!("role source reachable again");
                        failing = false;
                    }
                    if poll.renewed {
                        observed.last_renew = Some(started);
                    }
                    observed.last_read = Some(started);
                    if poll.renewal.is_some() && poll.renewal != observed.renew_time {
                        observed.holder_renewed = Some(started);
                    }
                    observed.renew_time = poll.renewal;
                    observed.lease = Some(poll.view);
                }
                Ok(Err(e)) if !failing => {
                    tracing::warn!(error = %e, "reading or renewing the Lease failed");
                    failing = true;
                }
                Err(_) if !failing => {
                    tracing::warn!("reading or renewing the Lease timed out");
                    failing = true;
                }
                _ => {}
            }
            if tx.send(observed.clone()).is_err() {
                return;
            }
            let switching = observed
                .lease
                .as_ref()
                .is_some_and(|lease| lease.switchover_to.is_some());
            let pause = if switching {
                interval / SWITCHOVER_POLL_DIVISOR
            } else {
                interval
            };
            let next = tokio::time::sleep_until((started + pause).into());
            tokio::select! {
                () = next => {}
                changed = intent_rx.changed() => if changed.is_err() {
                    return;
                },
                () = changed(&mut changes) => {}
            }
        }
    });
    (rx, intent_tx)
}

/// The next change of the Lease's [`Turn`]; never, without a watch (or once it has ended).
async fn changed(changes: &mut Option<watch::Receiver<Turn>>) {
    match changes {
        Some(receiver) => {
            if receiver.changed().await.is_err() {
                *changes = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "role_source_tests.rs"]
mod tests;
