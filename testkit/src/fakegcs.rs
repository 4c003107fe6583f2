//! fake-gcs-server (the GCS emulator) from the testbin cache on a free port.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::Emulator;

pub const FAKE_GCS_VERSION: &str = "v1.56.1";

/// Starts the emulator; `external_url` is the address clients reach it through (the
/// credential-checking gateway of `gcs_auth`): resumable-upload session URLs point there.
pub async fn start(external_url: &str) -> Emulator {
    let bin = crate::testbin("TUSK_FAKE_GCS_BIN", "fake-gcs-server", FAKE_GCS_VERSION);
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

/// Every object name under `prefix`, from the emulator's JSON API directly (not through the
/// gateway): what is really stored, whatever the code under test believes.
pub async fn list(gcs: &Emulator, bucket: &str, prefix: &str) -> Result<Vec<String>, String> {
    let http = reqwest::Client::new();
    let url = format!("{}/storage/v1/b/{bucket}/o", gcs.endpoint);
    let mut names = Vec::new();
    let mut page: Option<String> = None;
    loop {
        let mut query = vec![("prefix", prefix.to_string())];
        if let Some(token) = page.take() {
            query.push(("pageToken", token));
        }
        let response = http
            .get(&url)
            .query(&query)
            .send()
            .await
            .map_err(|e| format!("listing gs://{bucket}/{prefix}: {e}"))?;
        let status = response.status();
        let body: serde_json::Value = response
            .json()
            .await
            .map_err(|e| format!("listing gs://{bucket}/{prefix}: {status}: {e}"))?;
        if !status.is_success() {
            return Err(format!("listing gs://{bucket}/{prefix}: {status}: {body}"));
        }
        let items = body["items"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        names.extend(
            items
                .iter()
                .filter_map(|o| o["name"].as_str().map(str::to_string)),
        );
        match body["nextPageToken"].as_str() {
            Some(token) if !token.is_empty() => page = Some(token.to_string()),
            _ => break,
        }
    }
    names.sort();
    Ok(names)
}
