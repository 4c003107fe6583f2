//! MinIO from the testbin cache on a free port.

use std::process::Command;
use std::time::Duration;

use super::process::Service;

pub const MINIO_VERSION: &str = "v0.0.0-20260212201848-7aac2a2c5b7c";
pub const ACCESS_KEY: &str = "tuskadmin";
pub const SECRET_KEY: &str = "tusk-secret-key-123";

pub struct Minio {
    pub endpoint: String,
    _dir: tempfile::TempDir,
    _service: Service,
}

impl Minio {
    pub async fn start() -> Minio {
        let bin = super::testbin("TUSK_MINIO_BIN", "minio", MINIO_VERSION);
        let dir = tempfile::Builder::new()
            .prefix("tusk-minio-")
            .tempdir()
            .expect("temp dir");
        let port = super::free_port();
        let console = super::free_port();
        let mut cmd = Command::new(bin);
        cmd.arg("server")
            .arg(dir.path().join("data"))
            .args(["--address", &format!("127.0.0.1:{port}")])
            .args(["--console-address", &format!("127.0.0.1:{console}")])
            .env("MINIO_ROOT_USER", ACCESS_KEY)
            .env("MINIO_ROOT_PASSWORD", SECRET_KEY)
            .env("MINIO_BROWSER", "off")
            .env("MINIO_UPDATE", "off");
        let mut service = Service::spawn("minio", cmd, dir.path().join("minio.log"));
        let endpoint = format!("http://127.0.0.1:{port}");
        let url = format!("{endpoint}/minio/health/ready");
        super::wait_for_http(&mut service, &url, Duration::from_secs(60)).await;
        Minio {
            endpoint,
            _dir: dir,
            _service: service,
        }
    }
}
