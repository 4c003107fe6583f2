//! Failure paths: each must exit non-zero with a message that names the cause, and leave no
//! backup (and no open multipart upload) behind.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use common::agent::{agent, bare_agent, db_agent, error_of, run_fails, run_ok, run_refused};
use common::postgres::PgServer;
use common::seed;
use common::stores::{Kind, TestStore};

#[tokio::test(flavor = "multi_thread")]
async fn wrong_s3_credentials_exit_4() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    let mut cmd = agent(&store, "db", Some(&pg));
    cmd.env("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        .arg("backup");
    run_fails(cmd, 4, "credentials");
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_s3_credentials_exit_4() {
    let store = TestStore::start(Kind::Minio).await;
    let mut cmd = agent(&store, "db", None);
    cmd.env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .arg("list");
    run_fails(cmd, 4, "credentials");
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_bucket_exit_4_on_both_stores() {
    for kind in [Kind::Minio, Kind::Gcs] {
        let store = TestStore::start(kind).await;
        let mut cmd = agent(&store, "db", None);
        cmd.env("TUSK_BUCKET", "no-such-bucket").arg("list");
        eprintln!("store: {kind:?}");
        run_fails(cmd, 4, "bucket does not exist");
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
    run_fails(cmd, 4, "HMAC keys are not supported");
    // HMAC through the S3 API is refused up front as well.
    let mut cmd = agent(&store, "db", None);
    cmd.env("TUSK_STORE", "s3")
        .env_remove("TUSK_GCS_ENDPOINT")
        .env("TUSK_S3_ENDPOINT", "https://storage.googleapis.com")
        .arg("list");
    run_fails(cmd, 4, "--store gcs");
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_errors_exit_2_with_their_reason() {
    // Refused by clap before anything runs: the missing argument is the reason.
    let mut cmd = bare_agent();
    cmd.arg("backup");
    run_refused(cmd, "required arguments were not provided");
    // Refused by the agent: a namespace that cannot be part of a key.
    let store = TestStore::start(Kind::Minio).await;
    let mut cmd = agent(&store, "db", None);
    cmd.env("TUSK_NAMESPACE", "..").arg("list");
    run_fails(cmd, 2, "invalid arguments");
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
    run_fails(cmd, 3, "cannot connect");

    let pg = PgServer::start();
    let mut cmd = agent(&store, "db", Some(&pg));
    cmd.env("PGPASSWORD", "wrong-password").arg("backup");
    let error = run_fails(cmd, 3, "authentication failed");
    assert!(
        !error.contains("wrong-password"),
        "the password leaked: {error}"
    );
    assert!(store.keys("").await.is_empty());
}

/// A table another session holds locked: pg_dump gives up after `--lock-wait-timeout` instead
/// of waiting forever (which kept backup Jobs Running and the CronJob skipping every run).
#[tokio::test(flavor = "multi_thread")]
async fn a_locked_table_fails_the_backup_instead_of_hanging() {
    let store = TestStore::start(Kind::Minio).await;
    let pg = PgServer::start();
    seed::seed(&pg);
    let mut holder = std::process::Command::new(pg.bin_dir.join("psql"))
        .args(["-X", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "app"])
        .args(["-p", &pg.port.to_string()])
        .env("PGPASSWORD", common::postgres::PASSWORD)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn psql");
    let mut session = holder.stdin.take().expect("psql stdin");
    writeln!(
        session,
        "BEGIN; LOCK TABLE customers IN ACCESS EXCLUSIVE MODE;"
    )
    .expect("write");
    session.flush().expect("flush");
    let locked = "SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND granted \
                  AND relation = 'customers'::regclass";
    common::wait_until("the table lock", Duration::from_secs(30), || {
        let held = pg.psql("app", locked) == "1";
        async move { held }
    })
    .await;

    let mut cmd = agent(&store, "db", Some(&pg));
    cmd.env("TUSK_LOCK_WAIT_TIMEOUT", "1s")
        .args(["backup", "--backup-id", "locked"]);
    // Bounded, so that a backup that waits forever fails this test instead of hanging it.
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(run_fails(cmd, 1, "LOCK TABLE public.customers"));
    });
    match outcome.recv_timeout(Duration::from_secs(120)) {
        Ok(error) => assert!(error.contains("statement timeout"), "{error}"),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the backup still waits for the locked table after 2 minutes")
        }
        Err(e) => panic!("the backup did not fail as expected: {e}"),
    }
    drop(session);
    holder.wait().expect("psql ends with its stdin");
    assert!(store.keys("nightly/tests/db/").await.is_empty());
}

/// SIGTERM while a dump streams: the upload is aborted, nothing is listed.
async fn interrupted_upload(kind: Kind) {
    let store = TestStore::start(kind).await;
    let pg = PgServer::start();
    let payload = "md5(i::text) || md5((i * 7)::text) || md5((i * 13)::text)";
    seed::big_database(&pg, payload, 1_500_000);
    let termination = tempfile::tempdir().unwrap();
    let log = termination.path().join("termination-log");
    let mut cmd = agent(&store, "db", Some(&pg));
    cmd.args(["backup", "--compression", "none", "--backup-id", "killed"])
        .env("TUSK_TERMINATION_LOG", &log)
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
    let message = std::fs::read_to_string(&log).expect("a termination message");
    assert_eq!(message, error_of(&out));

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
    let listed = run_ok(list);
    assert_eq!(listed["backups"].as_array().unwrap().len(), 0);
}

on_each_store!(interrupted_upload);

/// One flipped byte in a stored dump: restore refuses before touching the target.
async fn corrupted_byte(kind: Kind) {
    let store = TestStore::start(kind).await;
    let source = PgServer::start();
    seed::seed(&source);
    let backup = db_agent(&store, &source, "backup --backup-id b1");
    run_ok(backup);

    let key = "nightly/tests/db/b1/db-reports.pgdump.zst";
    let mut bytes = backup_store::store::get_bytes(store.store.as_ref(), key)
        .await
        .unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    store.store.put(key, Bytes::from(bytes)).await.unwrap();

    let mut verify = agent(&store, "db", None);
    verify.args(["verify", "--backup-id", "b1"]);
    // Verify only has to fail with the integrity code; restore must also say why.
    run_fails(verify, 5, "");

    let target = PgServer::start();
    let restore = db_agent(&store, &target, "restore --backup-id b1");
    run_fails(restore, 5, "sha256");
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

on_each_store!(corrupted_byte);
