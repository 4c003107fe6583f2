//! fake-gcs-server (the GCS emulator) from the testbin cache on a free port.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::process::Emulator;

pub const FAKE_GCS_VERSION: &str = "v1.56.1";

/// Starts the emulator; `external_url` is the address clients reach it through (the
/// credential-checking gateway of `gcs_auth`): resumable-upload session URLs point there.
pub async fn start(external_url: &str) -> Emulator {
    let bin = super::testbin("TUSK_FAKE_GCS_BIN", "fake-gcs-server", FAKE_GCS_VERSION);
    let configure = |cmd: &mut Command, port: u16, _dir: &Path| {
        let port_arg = port.to_string();
        let public_host = external_url.trim_start_matches("http://");
        cmd.args(["-scheme", "http", "-host", "127.0.0.1", "-port", &port_arg])
            .args(["-backend", "memory", "-log-level", "warn"])
            .args(["-public-host", public_host])
            .args(["-external-url", external_url]);
    };
    Emulator::start(
        "fake-gcs-server",
        bin,
        configure,
        "/storage/v1/b",
        Duration::from_secs(30),
    )
    .await
}

pub async fn create_bucket(gcs: &Emulator, name: &str) {
    let response = reqwest::Client::new()
        .post(format!("{}/storage/v1/b?project=test", gcs.endpoint))
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
