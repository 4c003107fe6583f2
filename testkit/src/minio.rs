//! MinIO from the testbin cache on a free port, for every crate's tests (creating a bucket
//! needs an S3 client, which each test crate brings).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::Emulator;

pub const MINIO_VERSION: &str = "v0.0.0-20260212201848-7aac2a2c5b7c";
pub const ACCESS_KEY: &str = "tuskadmin";
pub const SECRET_KEY: &str = "tusk-secret-key-123";

/// MinIO over http, or over https when given a certificate directory (`public.crt` and
/// `private.key`, as MinIO's `--certs-dir` wants) and the PEM of the CA that signed it.
pub async fn start(tls: Option<(&str, &str)>) -> Emulator {
    let bin = crate::testbin("TUSK_MINIO_BIN", "minio", MINIO_VERSION);
    let configure = |cmd: &mut Command, port: u16, dir: &Path| {
        let console = crate::free_port();
        if let Some((certs_dir, _)) = tls {
            cmd.args(["--certs-dir", certs_dir]);
        }
        cmd.arg("server")
            .arg(dir.join("data"))
            .args(["--address", &format!("127.0.0.1:{port}")])
            .args(["--console-address", &format!("127.0.0.1:{console}")])
            .env("MINIO_ROOT_USER", ACCESS_KEY)
            .env("MINIO_ROOT_PASSWORD", SECRET_KEY)
            .env("MINIO_BROWSER", "off")
            .env("MINIO_UPDATE", "off");
    };
    let ready = "/minio/health/ready";
    let ca = tls.map(|(_, ca)| ca);
    Emulator::start_tls("minio", bin, configure, ready, Duration::from_secs(60), ca).await
}

/// What a process needs in its environment to reach `minio` the way the operator configures
/// the agent and the instance manager: the store variables and the S3 credentials.
pub fn store_env(minio: &Emulator, bucket: &str) -> Vec<(String, String)> {
    [
        ("TUSK_BUCKET", bucket),
        ("TUSK_STORE", "s3"),
        ("TUSK_S3_ENDPOINT", minio.endpoint.as_str()),
        ("TUSK_S3_FORCE_PATH_STYLE", "true"),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}
