//! The operator's Prometheus metrics: fetching the text and summing samples.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

use crate::{Context, Result, fail};

/// The sum of the samples whose line starts with `prefix` (a name, optionally with the start
/// of its labels, e.g. `tusk_clusters{phase="Ready"}`).
pub fn sum(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A plain HTTP/1.0 GET on loopback (the local operator's /metrics): the body.
pub async fn get(addr: impl ToSocketAddrs, path: &str) -> Result<String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .context("connecting to the operator's metrics port")?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_string(&mut response),
    )
    .await
    .context("the metrics endpoint did not answer within 5 s")??;
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        fail!("not an HTTP response: {response:.200}");
    };
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        fail!("GET {path}: {}", head.lines().next().unwrap_or_default());
    }
    Ok(body.to_string())
}
