//! A MinIO bucket for the archiving tests, and members configured to archive into it through
//! their managers, as the operator configures a pod (`src/resources/archive.rs`).

use std::time::Duration;

use backup_store::store::ObjectStore;
use backup_store::store::s3::{S3Config, S3Credentials, S3Store};
use tusk_testkit::minio;

use super::*;

pub const BUCKET: &str = "tusk-archive";

pub struct Bucket {
    pub runtime: tokio::runtime::Runtime,
    pub server: tusk_testkit::process::Emulator,
    pub store: S3Store,
}

impl Bucket {
    pub fn start() -> Bucket {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let server = runtime.block_on(minio::start(None));
        let store = runtime
            .block_on(S3Store::new(S3Config {
                bucket: BUCKET.into(),
                endpoint: Some(server.endpoint.clone()),
                region: "us-east-1".into(),
                force_path_style: true,
                credentials: Some(S3Credentials {
                    access_key_id: minio::ACCESS_KEY.into(),
                    secret_access_key: minio::SECRET_KEY.into(),
                }),
                ca_bundle: None,
            }))
            .expect("s3 store");
        wait_for("MinIO takes a bucket", Duration::from_secs(60), || {
            runtime
                .block_on(store.client().create_bucket().bucket(BUCKET).send())
                .is_ok()
        });
        Bucket {
            runtime,
            server,
            store,
        }
    }

    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let listed = self.runtime.block_on(self.store.list(prefix));
        let mut keys: Vec<String> = listed.expect("list").into_iter().map(|o| o.key).collect();
        keys.sort();
        keys
    }
}

/// Both members archive through their manager into `bucket`, as the operator configures them.
pub fn archiving_pair(bucket: &Bucket) -> Cluster {
    let mut cluster = Cluster::new(&["demo-0", "demo-1"]);
    archive_through_managers(&mut cluster, bucket);
    start_streaming(&mut cluster);
    cluster
}

/// Every member archives through its manager into `bucket` from its next start.
pub fn archive_through_managers(cluster: &mut Cluster, bucket: &Bucket) {
    let hook = cluster.binary.display().to_string();
    for member in &mut cluster.members {
        let conf = member
            .pgdata
            .parent()
            .expect("home")
            .join("postgresql.conf");
        let mut settings = std::fs::read_to_string(&conf).expect("postgresql.conf");
        settings.push_str(&format!(
            "archive_mode = always\narchive_command = '{hook} wal-push %p'\n"
        ));
        std::fs::write(&conf, settings).expect("postgresql.conf");
        for (key, value) in minio::store_env(&bucket.server, BUCKET) {
            member.set_env(&key, Some(&value));
        }
        member.set_env("TUSK_NAMESPACE", Some("tests"));
        member.set_env("TUSK_CLUSTER", Some("demo"));
    }
}

/// Writes a row into table `t` and closes the segment; returns the closed segment's name.
pub fn write_and_switch(member: &Instance, value: &str) -> String {
    member
        .psql(&format!(
            "CREATE TABLE IF NOT EXISTS t (v text); INSERT INTO t VALUES ('{value}')"
        ))
        .expect("insert");
    member
        .psql("SELECT pg_walfile_name(pg_switch_wal())")
        .expect("switch")
}
