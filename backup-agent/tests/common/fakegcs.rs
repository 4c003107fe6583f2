//! fake-gcs-server (the GCS emulator) from the testbin cache on a free port.

use std::process::Command;
use std::time::Duration;

use super::process::Service;

pub const FAKE_GCS_VERSION: &str = "v1.56.1";

pub struct FakeGcs {
    pub endpoint: String,
    _dir: tempfile::TempDir,
    _service: Service,
}

impl FakeGcs {
    pub async fn start() -> FakeGcs {
        let bin = super::testbin("TUSK_FAKE_GCS_BIN", "fake-gcs-server", FAKE_GCS_VERSION);
        let dir = tempfile::Builder::new()
            .prefix("tusk-gcs-")
            .tempdir()
            .expect("temp dir");
        let port = super::free_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let mut cmd = Command::new(bin);
        cmd.args([
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            &port.to_string(),
        ])
        .args(["-backend", "memory", "-log-level", "warn"])
        .args([
            "-public-host",
            &format!("127.0.0.1:{port}"),
            "-external-url",
            &endpoint,
        ]);
        let mut service = Service::spawn("fake-gcs-server", cmd, dir.path().join("gcs.log"));
        let url = format!("{endpoint}/storage/v1/b");
        super::wait_for_http(&mut service, &url, Duration::from_secs(30)).await;
        FakeGcs {
            endpoint,
            _dir: dir,
            _service: service,
        }
    }

    pub async fn create_bucket(&self, name: &str) {
        let response = reqwest::Client::new()
            .post(format!("{}/storage/v1/b?project=test", self.endpoint))
            .json(&serde_json::json!({ "name": name }))
            .send()
            .await
            .expect("create bucket request");
        assert!(
            response.status().is_success(),
            "create bucket: {}",
            response.status()
        );
    }
}
