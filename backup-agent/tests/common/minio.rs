//! MinIO from the testbin cache on a free port.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::process::Emulator;

pub const MINIO_VERSION: &str = "v0.0.0-20260212201848-7aac2a2c5b7c";
pub const ACCESS_KEY: &str = "tuskadmin";
pub const SECRET_KEY: &str = "tusk-secret-key-123";

pub async fn start() -> Emulator {
    start_with(None).await
}

/// MinIO over https with `tls`'s server certificate (signed by its private CA).
pub async fn start_tls(tls: &super::tls::TestCa) -> Emulator {
    start_with(Some(tls)).await
}

async fn start_with(tls: Option<&super::tls::TestCa>) -> Emulator {
    let bin = super::testbin("TUSK_MINIO_BIN", "minio", MINIO_VERSION);
    let configure = |cmd: &mut Command, port: u16, dir: &Path| {
        let console = super::free_port();
        if let Some(tls) = tls {
            cmd.args(["--certs-dir", tls.server_dir()]);
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
    let ca = tls.map(|t| t.ca_pem.as_str());
    Emulator::start_tls("minio", bin, configure, ready, Duration::from_secs(60), ca).await
}

/// Creates `bucket`, retrying while MinIO answers 503 `XMinioServerNotInitialized`: its ready
/// endpoint can answer before the object layer takes requests.
pub async fn create_bucket(store: &backup_store::store::s3::S3Store, bucket: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match store.client().create_bucket().bucket(bucket).send().await {
            Ok(_) => return,
            Err(e) => {
                let starting = format!("{e:?}").contains("XMinioServerNotInitialized");
                assert!(
                    starting && std::time::Instant::now() < deadline,
                    "create bucket {bucket}: {e:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
