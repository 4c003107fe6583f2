//! The operator's Prometheus metrics: fetching the text and summing samples; plain HTTP on
//! loopback.

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

/// A plain HTTP/1.0 GET on loopback (the local operator's /metrics, a local Prometheus): the
/// body of a 200 answer.
pub async fn get(addr: impl ToSocketAddrs, path: &str) -> Result<String> {
    request(addr, "GET", path).await
}

/// A plain HTTP/1.0 POST without a body (Prometheus's `/-/reload`).
pub async fn post(addr: impl ToSocketAddrs, path: &str) -> Result<String> {
    request(addr, "POST", path).await
}

async fn request(addr: impl ToSocketAddrs, method: &str, path: &str) -> Result<String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .context(format!("connecting for {method} {path}"))?;
    let head = format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_string(&mut response),
    )
    .await
    .context(format!("{method} {path}: no answer within 5 s"))??;
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        fail!("not an HTTP response: {response:.200}");
    };
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        fail!(
            "{method} {path}: {}: {body:.300}",
            head.lines().next().unwrap_or_default()
        );
    }
    Ok(body.to_string())
}
