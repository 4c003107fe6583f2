//! Failure paths: each must exit non-zero with a message that names the cause, and leave no
//! backup (and no open multipart upload) behind.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use bytes::Bytes;
use common::agent::{agent, run, summary};
use common::postgres::PgServer;
use common::seed;
use common::stores::{Kind, TestStore};

fn error_of(out: &std::process::Output) -> String {
    summary(out)["error"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_s3_credentials_exit_4() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    let mut cmd = agent(&store, "db", Some(&pg));
    cmd.env("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        .arg("backup");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(4));
    assert!(error_of(&out).contains("credentials"), "{}", error_of(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_s3_credentials_exit_4() {
    let store = TestStore::start(Kind::Minio).await;
    let mut cmd = agent(&store, "db", None);
    cmd.env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .arg("list");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(4));
    assert!(error_of(&out).contains("credentials"), "{}", error_of(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_bucket_exit_4_on_both_stores() {
    for kind in [Kind::Minio, Kind::Gcs] {
        let store = TestStore::start(kind).await;
        let mut cmd = agent(&store, "db", None);
        cmd.env("TUSK_BUCKET", "no-such-bucket").arg("list");
        let out = run(cmd);
        assert_eq!(out.status.code(), Some(4), "{kind:?}");
        assert!(
            error_of(&out).contains("bucket does not exist"),
            "{kind:?}: {}",
            error_of(&out)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn gcs_hmac_credentials_are_an_explicit_error() {
    let store = TestStore::start(Kind::Gcs).await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("hmac.txt");
    std::fs::write(&key, "GOOG1EEXAMPLEACCESSID\nsecretsecret\n").unwrap();
    let mut cmd = agent(&store, "db", None);
    cmd.env("GOOGLE_APPLICATION_CREDENTIALS", &key).arg("list");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        error_of(&out).contains("HMAC keys are not supported"),
        "{}",
        error_of(&out)
    );
    // HMAC through the S3 API is refused up front as well.
    let mut cmd = agent(&store, "db", None);
    cmd.env("TUSK_STORE", "s3")
        .env_remove("TUSK_GCS_ENDPOINT")
        .env("TUSK_S3_ENDPOINT", "https://storage.googleapis.com")
        .arg("list");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(4));
    assert!(error_of(&out).contains("--store gcs"), "{}", error_of(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn unreachable_database_and_bad_password_exit_3() {
    let store = TestStore::start(Kind::Minio).await;
    let mut cmd = agent(&store, "db", None);
    cmd.env("PGHOST", "127.0.0.1")
        .env("PGPORT", common::free_port().to_string())
        .env("PGPASSWORD", "x")
        .env("TUSK_CONNECT_TIMEOUT", "1s")
        .arg("backup");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        error_of(&out).contains("cannot connect"),
        "{}",
        error_of(&out)
    );

    let pg = PgServer::start();
    let mut cmd = agent(&store, "db", Some(&pg));
    cmd.env("PGPASSWORD", "wrong-password").arg("backup");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(3));
    let error = error_of(&out);
    assert!(error.contains("authentication failed"), "{error}");
    assert!(
        !error.contains("wrong-password"),
        "the password leaked: {error}"
    );
    assert!(store.keys("").await.is_empty());
}

/// SIGTERM while a dump streams: the upload is aborted, nothing is listed.
async fn interrupted_upload(kind: Kind) {
    let store = TestStore::start(kind).await;
    let pg = PgServer::start();
    pg.psql("postgres", "CREATE DATABASE big");
    pg.psql(
        "big",
        "CREATE TABLE filler AS SELECT i, md5(i::text) || md5((i * 7)::text) || md5((i * 13)::text) AS payload \
         FROM generate_series(1, 1500000) i",
    );
    let mut cmd = agent(&store, "db", Some(&pg));
    cmd.args(["backup", "--compression", "none", "--backup-id", "killed"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn agent");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    loop {
        let line = lines
            .next()
            .expect("agent ended before the big upload started")
            .expect("read");
        let started = line.contains("upload started") && line.contains("db-big");
        seen.push(line);
        if started {
            break;
        }
    }
    if kind == Kind::Minio {
        // The check below is only meaningful if an upload was really open at this point.
        let open = store
            .store
            .pending_uploads("nightly/tests/db/")
            .await
            .unwrap();
        assert_eq!(
            open.len(),
            1,
            "expected the big dump's multipart upload to be open"
        );
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    seen.extend(lines.map_while(Result::ok));
    let out = child.wait_with_output().expect("wait agent");
    eprintln!("{}", seen.join("\n"));
    assert_eq!(out.status.code(), Some(1));
    assert!(error_of(&out).contains("interrupted"), "{}", error_of(&out));

    let prefix = "nightly/tests/db/";
    assert!(
        store.keys(prefix).await.is_empty(),
        "objects left: {:?}",
        store.keys(prefix).await
    );
    assert!(
        store
            .store
            .pending_uploads(prefix)
            .await
            .unwrap()
            .is_empty(),
        "multipart upload left open"
    );
    let mut list = agent(&store, "db", None);
    list.arg("list");
    let listed = common::agent::run_ok(list);
    assert_eq!(listed["backups"].as_array().unwrap().len(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupted_upload_minio() {
    interrupted_upload(Kind::Minio).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupted_upload_gcs() {
    interrupted_upload(Kind::Gcs).await;
}

/// One flipped byte in a stored dump: restore refuses before touching the target.
async fn corrupted_byte(kind: Kind) {
    let store = TestStore::start(kind).await;
    let source = PgServer::start();
    seed::seed(&source);
    let mut backup = agent(&store, "db", Some(&source));
    backup.args(["backup", "--backup-id", "b1"]);
    common::agent::run_ok(backup);

    let key = "nightly/tests/db/b1/db-reports.pgdump.zst";
    let mut bytes = backup_store::store::get_bytes(store.store.as_ref(), key)
        .await
        .unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    store.store.put(key, Bytes::from(bytes)).await.unwrap();

    let mut verify = agent(&store, "db", None);
    verify.args(["verify", "--backup-id", "b1"]);
    let out = run(verify);
    assert_eq!(out.status.code(), Some(5));

    let target = PgServer::start();
    let mut restore = agent(&store, "db", Some(&target));
    restore.args(["restore", "--backup-id", "b1"]);
    let out = run(restore);
    assert_eq!(out.status.code(), Some(5));
    assert!(error_of(&out).contains("sha256"), "{}", error_of(&out));
    assert_eq!(
        target.psql(
            "postgres",
            "SELECT count(*) FROM pg_database WHERE datname IN ('app', 'reports')"
        ),
        "0"
    );
    assert_eq!(
        target.psql(
            "postgres",
            "SELECT count(*) FROM pg_roles WHERE rolname = 'app_owner'"
        ),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupted_byte_minio() {
    corrupted_byte(Kind::Minio).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupted_byte_gcs() {
    corrupted_byte(Kind::Gcs).await;
}
