//! One long-lived connection to the local server, polled twice a second: what the server says
//! about itself (in recovery or not, its positions, its WAL receiver, its timeline) and, on a
//! primary, its standbys and slots. `/status`, `/readyz` and `/metrics` read these cached facts
//! instead of connecting per request (an application exhausting `max_connections` no longer
//! takes the primary out of `-rw`, and a flood of requests costs the server nothing), and the
//! supervisor learns from them what the server really is — a promotion still pending, or one
//! nobody asked for, shows here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_postgres::Client;

use crate::context::Context;
use crate::error::Error;
use tusk_contract::Lsns;
use tusk_contract::status::HOT_STANDBY_SETTINGS;

/// How often the server is asked.
const POLL: Duration = Duration::from_millis(250);
/// How often while the manager hurries (`Context::hurry`): a switchover's target reports the
/// old primary's final WAL replayed, and a promotion is seen finished, this much sooner.
const HURRIED_POLL: Duration = Duration::from_millis(50);
/// How soon a postmaster that did not accept the connection yet is asked again.
const CONNECT_RETRY: Duration = Duration::from_millis(100);
/// How long one round of questions may take before the connection is dropped and made anew.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// Facts older than this are not trusted (the server stopped answering).
pub const FRESH_FOR: Duration = Duration::from_secs(3);

/// What the local server says about itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerFacts {
    pub in_recovery: bool,
    pub timeline: Option<i64>,
    pub system_identifier: Option<String>,
    pub lsn: Lsns,
    pub wal_receiver: Option<String>,
    /// The hot-standby settings (`tusk_contract::status::HOT_STANDBY_SETTINGS`) as they run.
    pub settings: BTreeMap<String, i64>,
    /// On a primary: those whose configuration files now give a lower value than the running
    /// one, which the next start will take (the ConfigMap changed).
    pub lowered: Vec<String>,
}

/// A standby as the primary's `pg_stat_replication` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standby {
    pub name: String,
    pub state: String,
    /// Bytes between the primary's current WAL position and what the standby replayed.
    pub lag_bytes: Option<i64>,
}

/// A replication slot on the primary and the WAL it holds back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub name: String,
    pub active: bool,
    /// Bytes of WAL kept for it (from its restart position to the current one).
    pub retained_bytes: Option<i64>,
    /// `reserved`, `extended`, `unreserved` or `lost` (`max_slot_wal_keep_size` passed).
    pub wal_status: Option<String>,
}

/// The last round of questions.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// The postmaster these facts are about (the supervisor's start counter).
    pub generation: Option<u64>,
    /// `None`: the server did not answer.
    pub facts: Option<ServerFacts>,
    pub standbys: Vec<Standby>,
    pub slots: Vec<Slot>,
    pub at: Option<Instant>,
    /// The postmaster the server last answered about: when it is this one, an answer missing
    /// now is a server that stopped answering (shutting down, say), not one still starting.
    pub answered: Option<u64>,
}

impl Observation {
    /// The facts, if they are about postmaster `generation` and recent.
    pub fn fresh(&self, generation: Option<u64>) -> Option<&ServerFacts> {
        let recent = self.at.is_some_and(|at| at.elapsed() < FRESH_FOR);
        (generation.is_some() && self.generation == generation && recent)
            .then_some(self.facts.as_ref())
            .flatten()
    }
}

// The timeline: a primary's from its current WAL file name (the last checkpoint may predate a
// promotion). A standby's is the newest timeline whose WAL it holds: its WAL receiver's, or the
// newest segment or history file in pg_wal — not its last restartpoint's, which after
// back-to-back failovers can name a timeline it has long left (a less advanced replica would
// then win the election).
const FACTS: &str = "SELECT pg_is_in_recovery(), \
    (SELECT system_identifier::text FROM pg_control_system()), \
    CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END, \
    pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text, \
    (SELECT status FROM pg_stat_wal_receiver), \
    CASE WHEN pg_is_in_recovery() \
      THEN GREATEST((SELECT received_tli FROM pg_stat_wal_receiver), \
        (SELECT max(('x' || substr(name, 1, 8))::bit(32)::int) FROM pg_ls_waldir() \
          WHERE name ~ '^[0-9A-F]{24}$' OR name ~ '^[0-9A-F]{8}[.]history$'), \
        (SELECT timeline_id FROM pg_control_checkpoint()))::int8 \
      ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END, \
    (SELECT json_object_agg(name, setting) FROM pg_settings WHERE name = ANY($1))::text";

// On a primary, what the next start would take for each hot-standby setting: the last line
// of the configuration files that sets it (pg_file_settings parses them as they are now; the
// ConfigMap volume follows the ConfigMap), or the built-in default when no file sets it. Its
// `error` is not filtered on: a changed restart-only setting always has one ("could not be
// applied"); a value that is not a number is left out when parsed.
const NEXT_SETTINGS: &str = "SELECT s.name, s.setting, COALESCE((SELECT f.setting \
    FROM pg_file_settings f WHERE f.name = s.name \
    ORDER BY f.seqno DESC LIMIT 1), s.boot_val) FROM pg_settings s WHERE s.name = ANY($1)";

// pg_basebackup's streams are clones in progress, not members.
const STANDBYS: &str = "SELECT application_name, state, \
    pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::int8 \
    FROM pg_stat_replication WHERE application_name <> 'pg_basebackup' ORDER BY 1";

const SLOTS: &str = "SELECT slot_name::text, active, \
    pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8, wal_status \
    FROM pg_replication_slots WHERE slot_type = 'physical' ORDER BY 1";

/// Starts polling the server of the postmaster `running` names (its start counter, `None`
/// while none runs); returns the latest observation.
pub fn spawn(
    ctx: Arc<Context>,
    mut running: watch::Receiver<Option<u64>>,
) -> watch::Receiver<Observation> {
    let (tx, rx) = watch::channel(Observation::default());
    tokio::spawn(async move {
        let mut client: Option<(u64, Client)> = None;
        let mut answered = None;
        loop {
            let generation = *running.borrow_and_update();
            let observation = match generation {
                None => {
                    client = None;
                    Observation::default()
                }
                Some(generation) => {
                    if client.as_ref().is_none_or(|(g, _)| *g != generation) {
                        client = crate::sql::connect(ctx.as_ref(), "postgres")
                            .await
                            .ok()
                            .map(|c| (generation, c));
                    }
                    let asked = match &client {
                        Some((_, c)) => tokio::time::timeout(QUERY_TIMEOUT, ask(c)).await.ok(),
                        None => None,
                    };
                    let mut observation = match asked {
                        Some(Ok(observation)) => observation,
                        _ => {
                            // Reconnect next round: the server restarted, or the connection hung.
                            client = None;
                            Observation::default()
                        }
                    };
                    observation.generation = Some(generation);
                    observation.at = Some(Instant::now());
                    if observation.facts.is_some() {
                        answered = Some(generation);
                    }
                    observation.answered = answered;
                    observation
                }
            };
            if tx.send(observation).is_err() {
                return;
            }
            // A new postmaster is asked at once, one still starting soon; otherwise every POLL.
            let pause = if generation.is_some() && client.is_none() {
                CONNECT_RETRY
            } else if ctx.hurry() {
                HURRIED_POLL
            } else {
                POLL
            };
            let _ = tokio::time::timeout(pause, running.changed()).await;
        }
    });
    rx
}

async fn ask(client: &Client) -> Result<Observation, Error> {
    let names: Vec<&str> = HOT_STANDBY_SETTINGS.to_vec();
    let row = client
        .query_one(FACTS, &[&names])
        .await
        .map_err(Error::sql("reading the server's status"))?;
    let settings: Option<String> = row.get(7);
    let mut facts = ServerFacts {
        in_recovery: row.get(0),
        system_identifier: row.get(1),
        lsn: Lsns {
            current: row.get(2),
            received: row.get(3),
            replayed: row.get(4),
        },
        wal_receiver: row.get(5),
        timeline: row.get(6),
        settings: parse_settings(settings.as_deref()),
        lowered: Vec::new(),
    };
    let (mut standbys, mut slots) = (Vec::new(), Vec::new());
    if !facts.in_recovery {
        let rows = client
            .query(NEXT_SETTINGS, &[&names])
            .await
            .map_err(Error::sql("reading pg_file_settings"))?;
        facts.lowered = rows
            .iter()
            .filter_map(|row| {
                let (name, running, next): (String, String, String) =
                    (row.get(0), row.get(1), row.get(2));
                let (running, next) = (running.parse::<i64>().ok()?, next.parse::<i64>().ok()?);
                (next < running).then_some(name)
            })
            .collect();
        facts.lowered.sort();
        let rows = client
            .query(STANDBYS, &[])
            .await
            .map_err(Error::sql("reading pg_stat_replication"))?;
        standbys = rows
            .iter()
            .map(|row| Standby {
                name: row.get(0),
                state: row.get(1),
                lag_bytes: row.get(2),
            })
            .collect();
        let rows = client
            .query(SLOTS, &[])
            .await
            .map_err(Error::sql("reading pg_replication_slots"))?;
        slots = rows
            .iter()
            .map(|row| Slot {
                name: row.get(0),
                active: row.get(1),
                retained_bytes: row.get(2),
                wal_status: row.get(3),
            })
            .collect();
    }
    Ok(Observation {
        facts: Some(facts),
        standbys,
        slots,
        ..Observation::default()
    })
}

/// `{"max_connections": "200", …}` as numbers; a value that is not one is left out.
fn parse_settings(json: Option<&str>) -> BTreeMap<String, i64> {
    let map: BTreeMap<String, String> = json
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    map.into_iter()
        .filter_map(|(name, value)| Some((name, value.parse().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_as_numbers() {
        let parsed = parse_settings(Some(r#"{"max_connections": "200", "odd": "on"}"#));
        assert_eq!(
            parsed,
            BTreeMap::from([("max_connections".to_owned(), 200)])
        );
        assert!(parse_settings(None).is_empty());
    }

    #[test]
    fn facts_count_only_for_the_postmaster_they_were_read_from_and_while_recent() {
        let observation = Observation {
            generation: Some(3),
            facts: Some(ServerFacts::default()),
            at: Some(Instant::now()),
            ..Observation::default()
        };
        assert!(observation.fresh(Some(3)).is_some());
        assert!(observation.fresh(Some(4)).is_none(), "a newer postmaster");
        assert!(observation.fresh(None).is_none(), "none runs");
        let old = Observation {
            at: Instant::now().checked_sub(FRESH_FOR),
            ..observation
        };
        assert!(old.fresh(Some(3)).is_none(), "the server stopped answering");
    }
}
