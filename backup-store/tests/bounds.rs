//! Hostile or stalled endpoints: a tarpit that accepts connections and never answers fails
//! every call of a [`Bounded`] store within its deadline, on both backends; endless listings and
//! endless manifests are refused instead of filling memory.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::IntoResponse;
use backup_store::store::gcs::{GcsConfig, GcsStore};
use backup_store::store::s3::{S3Config, S3Credentials, S3Store};
use backup_store::store::{self, Bounded, MAX_LIST_PAGES, ObjectStore, StoreError};

const DEADLINE: Duration = Duration::from_millis(500);
/// Far below "forever", far above the deadline on a loaded machine.
const BOUND: Duration = Duration::from_secs(10);

/// Accepts every connection and holds it open without a byte of answer.
async fn tarpit() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    endpoint
}

async fn s3(endpoint: &str) -> Box<dyn ObjectStore> {
    Box::new(
        S3Store::new(S3Config {
            bucket: "tusk-backups".into(),
            endpoint: Some(endpoint.into()),
            region: "us-east-1".into(),
            force_path_style: true,
            credentials: Some(S3Credentials {
                access_key_id: "id".into(),
                secret_access_key: "secret".into(),
            }),
            ca_bundle: None,
        })
        .await
        .unwrap(),
    )
}

fn gcs(endpoint: &str) -> Box<dyn ObjectStore> {
    Box::new(
        GcsStore::new(GcsConfig {
            bucket: "tusk-backups".into(),
            endpoint: Some(endpoint.into()),
            ..Default::default()
        })
        .unwrap(),
    )
}

async fn assert_times_out<T>(what: &str, call: impl Future<Output = Result<T, StoreError>>) {
    let started = Instant::now();
    let outcome = tokio::time::timeout(BOUND, call)
        .await
        .unwrap_or_else(|_| panic!("{what} still hanging after {BOUND:?}"));
    let Err(err) = outcome else {
        panic!("{what} succeeded against a tarpit");
    };
    assert!(matches!(err, StoreError::TimedOut { .. }), "{what}: {err}");
    assert!(
        err.to_string().contains("did not finish within 0.5s"),
        "{err}"
    );
    eprintln!("{what}: {err} after {:?}", started.elapsed());
}

#[tokio::test]
async fn tarpit_fails_every_call_within_the_deadline() {
    let endpoint = tarpit().await;
    for (name, inner) in [("s3", s3(&endpoint).await), ("gcs", gcs(&endpoint))] {
        // Why the deadline is needed: neither client gives up on its own.
        let unbounded = tokio::time::timeout(4 * DEADLINE, inner.check()).await;
        assert!(
            unbounded.is_err(),
            "{name}: the client has its own deadline"
        );
        let bounded = Bounded::new(inner, DEADLINE);
        assert_times_out(&format!("{name} check"), bounded.check()).await;
        assert_times_out(&format!("{name} list"), bounded.list("p/ns/db/")).await;
        assert_times_out(
            &format!("{name} manifest"),
            store::get_bytes(&bounded, "p/ns/db/b1/manifest.json"),
        )
        .await;
        let keys = ["p/ns/db/b1/manifest.json".to_owned()];
        assert_times_out(&format!("{name} delete"), bounded.delete_many(&keys)).await;
    }
}

/// Within the deadline a Bounded store answers as its inner one does.
#[tokio::test]
async fn a_prompt_answer_passes_through() {
    let app = axum::Router::new().fallback(|| async { "{\"backupId\":\"b1\"}" });
    let endpoint = serve(app).await;
    let bounded = Bounded::new(gcs(&endpoint), DEADLINE);
    let body = store::get_bytes(&bounded, "p/ns/db/b1/manifest.json")
        .await
        .expect("a prompt answer");
    assert_eq!(body, br#"{"backupId":"b1"}"#);
}

/// A server that sends headers and then stalls the body: the body shares the call's deadline.
#[tokio::test]
async fn a_stalled_download_body_times_out() {
    let app = axum::Router::new().fallback(|| async {
        let stalled = futures::stream::once(async { Ok::<_, std::io::Error>("{") })
            .chain(futures::stream::pending());
        Body::from_stream(stalled)
    });
    let endpoint = serve(app).await;
    let bounded = Bounded::new(gcs(&endpoint), DEADLINE);
    let started = Instant::now();
    let err = tokio::time::timeout(BOUND, store::get_bytes(&bounded, "k"))
        .await
        .expect("bounded")
        .expect_err("a stalled body");
    assert!(err.to_string().contains("did not finish within"), "{err}");
    assert!(started.elapsed() < BOUND);
}

use futures::StreamExt as _;

async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    endpoint
}

/// Every page has one object and a next page token, forever.
#[tokio::test]
async fn endless_listing_is_refused() {
    let app = axum::Router::new().fallback(|uri: axum::http::Uri| async move {
        let n: u64 = uri
            .query()
            .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("pageToken=")))
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let body = serde_json::json!({
            "items": [{"name": format!("p/ns/db/b{n}/manifest.json"), "size": "2"}],
            "nextPageToken": (n + 1).to_string(),
        });
        ([("content-type", "application/json")], body.to_string()).into_response()
    });
    let endpoint = serve(app).await;
    let err = gcs(&endpoint)
        .list("p/ns/db/")
        .await
        .expect_err("an endless listing");
    assert!(matches!(err, StoreError::TooLarge { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("exceeds {MAX_LIST_PAGES} result pages")),
        "{err}"
    );
}

/// A "manifest" that never ends is refused at the cap instead of being read into memory.
#[tokio::test]
async fn endless_manifest_is_refused() {
    let app = axum::Router::new().fallback(|| async {
        let chunk = bytes::Bytes::from(vec![b' '; 1 << 20]);
        Body::from_stream(futures::stream::repeat_with(move || {
            Ok::<_, std::io::Error>(chunk.clone())
        }))
    });
    let endpoint = serve(app).await;
    let err = store::get_bytes(gcs(&endpoint).as_ref(), "p/ns/db/b1/manifest.json")
        .await
        .expect_err("an endless manifest");
    assert!(matches!(err, StoreError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("exceeds 16777216 bytes"), "{err}");
}
