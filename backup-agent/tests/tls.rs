//! S3 endpoints with a certificate from a private CA (MinIO over https): trusted through
//! `s3.caBundle`, by the operator's store (PEM read from a Secret or ConfigMap) and by the agent
//! (the bundle mounted as a file, TUSK_S3_CA_BUNDLE); refused without it.

mod common;

use backup_store::store::ObjectStore;
use backup_store::store::s3::S3Store;
use common::agent::{bare_agent, run, run_ok};
use common::stores::{BUCKET, s3_config};
use common::tls::TestCa;
use common::{minio, process::Emulator};

async fn store(minio: &Emulator, ca_bundle: Option<&str>) -> S3Store {
    let mut config = s3_config(&minio.endpoint, BUCKET, minio::SECRET_KEY);
    config.ca_bundle = ca_bundle.map(str::to_owned);
    S3Store::new(config).await.expect("s3 store")
}

fn agent_list(minio: &Emulator, ca_file: Option<&std::path::Path>) -> std::process::Command {
    let mut cmd = bare_agent();
    cmd.arg("list")
        .env("TUSK_STORE", "s3")
        .env("TUSK_BUCKET", BUCKET)
        .env("TUSK_NAMESPACE", "tests")
        .env("TUSK_CLUSTER", "db")
        .env("TUSK_S3_ENDPOINT", &minio.endpoint)
        .env("TUSK_S3_FORCE_PATH_STYLE", "true")
        .env("AWS_ACCESS_KEY_ID", minio::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", minio::SECRET_KEY)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    if let Some(file) = ca_file {
        cmd.env("TUSK_S3_CA_BUNDLE", file);
    }
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn minio_over_tls_with_a_private_ca() {
    let ca = TestCa::generate();
    let minio = minio::start_tls(&ca).await;
    assert!(minio.endpoint.starts_with("https://"), "{}", minio.endpoint);

    // The operator's store: the bundle's PEM, as read from the destination's Secret.
    let trusted = store(&minio, Some(&ca.ca_pem)).await;
    minio::create_bucket(&trusted, BUCKET).await;
    trusted
        .check()
        .await
        .expect("bucket check with the CA bundle");

    // Without it the endpoint's certificate is not trusted.
    let err = store(&minio, None)
        .await
        .check()
        .await
        .expect_err("untrusted");
    eprintln!("without the bundle: {err}");

    // The agent: the bundle mounted as a file.
    let listed = run_ok(agent_list(&minio, Some(&ca.ca_file)));
    assert_eq!(listed["backups"], serde_json::json!([]));
    let out = run(agent_list(&minio, None));
    assert_eq!(
        out.status.code(),
        Some(4),
        "untrusted endpoint: object store exit code"
    );
}
