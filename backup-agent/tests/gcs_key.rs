//! GCS service-account keys are really used, by the operator's store (key JSON from a Secret)
//! and by the agent (the key mounted as a file): the emulator sits behind a gateway that only
//! lets requests through with a token issued for a JWT signed by the test's own key.

mod common;

use backup_store::store::gcs::{GcsConfig, GcsStore};
use backup_store::store::{ObjectStore, StoreError, get_bytes};
use bytes::Bytes;
use common::agent::{agent, run_ok};
use common::stores::{Kind, TestStore};

/// The operator's path: `StoreConfig::Gcs` with `credentials_json` (what SecretBuckets reads).
/// Before the fix the JSON was ignored and requests went out anonymously.
#[tokio::test(flavor = "multi_thread")]
async fn operator_store_authenticates_with_the_secret_key() {
    let store = TestStore::start(Kind::Gcs).await;
    let gateway = store.gateway().expect("gcs gateway");
    let s = store.store.as_ref();
    s.check().await.expect("bucket check with the key");
    s.put(
        "nightly/tests/db/b1/manifest.json",
        Bytes::from_static(b"{}"),
    )
    .await
    .expect("put");
    let listed = store.keys("nightly/tests/db/").await;
    assert_eq!(listed, ["nightly/tests/db/b1/manifest.json"]);
    let read = get_bytes(s, "nightly/tests/db/b1/manifest.json")
        .await
        .expect("get");
    assert_eq!(read, b"{}");
    s.delete_many(&listed).await.expect("delete");
    assert!(store.keys("nightly/tests/db/").await.is_empty());
    assert!(
        gateway.verified() >= 1,
        "no JWT signed with the key reached the token endpoint"
    );
    assert_eq!(gateway.refused(), 0, "requests went out without the token");
}

/// The gateway is a real check: the same store without a key is refused with a credentials
/// error, so the test above cannot pass anonymously.
#[tokio::test(flavor = "multi_thread")]
async fn without_the_key_the_gateway_refuses() {
    let store = TestStore::start(Kind::Gcs).await;
    let anonymous = GcsStore::new(GcsConfig {
        bucket: common::stores::BUCKET.into(),
        endpoint: Some(store.endpoint().to_owned()),
        ..Default::default()
    })
    .expect("anonymous store");
    let err = anonymous.check().await.expect_err("anonymous access");
    assert!(matches!(err, StoreError::Credentials { .. }), "{err}");
    assert_eq!(store.gateway().expect("gateway").refused(), 1);
}

/// The agent's path: GOOGLE_APPLICATION_CREDENTIALS, as the Job mounts the Secret.
#[tokio::test(flavor = "multi_thread")]
async fn agent_authenticates_with_the_mounted_key() {
    let store = TestStore::start(Kind::Gcs).await;
    let listed = run_ok({
        let mut c = agent(&store, "db", None);
        c.arg("list");
        c
    });
    assert_eq!(listed["backups"], serde_json::json!([]));
    let gateway = store.gateway().expect("gateway");
    assert!(gateway.verified() >= 1, "the agent never asked for a token");
    assert_eq!(gateway.refused(), 0);
}
