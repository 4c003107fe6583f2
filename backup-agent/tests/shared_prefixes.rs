//! Two writers of one backup id (issue 12, defect 8): the same cluster name in two Kubernetes
//! clusters writing to one bucket and path. Create-only writes on the real servers (the pinned
//! MinIO, the GCS emulator), and the agent failing cleanly before it uploads anything.

mod common;

use bytes::Bytes;

use backup_store::claim::{CLAIM_FILE, Claim};
use backup_store::layout::ClusterLocation;
use backup_store::manifest::Manifest;
use backup_store::store::get_bytes;
use common::agent::{NAMESPACE, agent, run_fails, run_ok};
use common::postgres::PgServer;
use common::seed;
use common::stores::{Kind, TestStore};

async fn create_only(kind: Kind) {
    let store = TestStore::start(kind).await;
    let key = "p/ns/db/b1/claim.json";
    store
        .store
        .put_if_absent(key, Bytes::from_static(b"first"))
        .await
        .expect("the first create");
    let err = store
        .store
        .put_if_absent(key, Bytes::from_static(b"second"))
        .await
        .expect_err("a second create is refused");
    assert!(err.is_already_exists(), "{err}");
    assert!(err.to_string().contains("already exists"), "{err}");
    let kept = get_bytes(store.store.as_ref(), key).await.expect("read");
    assert_eq!(kept, b"first", "the first writer's object is untouched");
}

#[tokio::test]
async fn minio_refuses_a_second_create_of_a_key() {
    create_only(Kind::Minio).await;
}

#[tokio::test]
async fn gcs_refuses_a_second_create_of_a_key() {
    create_only(Kind::Gcs).await;
}

fn claim_of(uid: &str, writer: &str) -> Claim {
    Claim {
        cluster_uid: Some(uid.into()),
        writer: Some(writer.into()),
        claimed_at: jiff::Timestamp::now(),
    }
}

async fn put_claim(store: &TestStore, location: &ClusterLocation, id: &str, claim: &Claim) {
    let body = serde_json::to_vec(claim).expect("claim JSON");
    store
        .store
        .put(&location.object_key(id, CLAIM_FILE), Bytes::from(body))
        .await
        .expect("put claim");
}

#[tokio::test]
async fn a_second_cluster_writing_the_same_id_fails_cleanly() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    seed::seed(&pg);
    let location = ClusterLocation::new("nightly", NAMESPACE, "db").expect("location");

    // The peer (same namespace/name/bucket/path elsewhere) is writing `b1` right now.
    put_claim(&store, &location, "b1", &claim_of("peer-uid", "peer-job")).await;
    let mut ours = agent(&store, "db", Some(&pg));
    ours.env("TUSK_CLUSTER_UID", "our-uid")
        .env("TUSK_WRITER_ID", "our-job")
        .args(["backup", "--backup-id", "b1"]);
    let error = run_fails(
        ours,
        2,
        "backup id b1 at s3://tusk-backups/nightly/tests/db/b1/ is taken",
    );
    assert!(error.contains("peer-uid"), "names the holder: {error}");
    assert_eq!(
        store.keys(&location.backup_prefix("b1")).await,
        [location.object_key("b1", CLAIM_FILE)],
        "nothing uploaded, the peer's claim kept"
    );

    // A retried pod of the same Job takes its own claim over and completes; the manifest
    // records the owner.
    put_claim(&store, &location, "b2", &claim_of("our-uid", "our-job")).await;
    let mut retry = agent(&store, "db", Some(&pg));
    retry
        .env("TUSK_CLUSTER_UID", "our-uid")
        .env("TUSK_WRITER_ID", "our-job")
        .args(["backup", "--backup-id", "b2"]);
    run_ok(retry);
    let bytes = get_bytes(store.store.as_ref(), &location.manifest_key("b2"))
        .await
        .expect("manifest");
    let manifest = Manifest::from_json(&bytes).expect("manifest JSON");
    assert_eq!(manifest.cluster_uid.as_deref(), Some("our-uid"));
}

#[tokio::test]
async fn a_failed_backup_releases_its_claim() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    seed::seed(&pg);
    let mut failing = agent(&store, "db", Some(&pg));
    failing.env("TUSK_CLUSTER_UID", "our-uid").args([
        "backup",
        "--backup-id",
        "b1",
        "--database",
        "app",
    ]);
    // Only pg_dump is there: the version check passes, the dump of the globals fails after
    // the id was claimed.
    let bin = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(
        common::postgres::bin_dir().join("pg_dump"),
        bin.path().join("pg_dump"),
    )
    .expect("link pg_dump");
    failing.env("TUSK_PG_BIN_DIR", bin.path());
    let out = common::agent::run(failing);
    assert!(!out.status.success());
    assert!(
        store.keys("nightly/tests/db/b1/").await.is_empty(),
        "a failed run leaves neither dumps nor its claim"
    );
}
