//! A store that refuses bulk DeleteObjects (as GCS's S3 API and some gateways do): the S3 backend
//! falls back to deleting each object. The refusing endpoint is a minimal local HTTP responder.

use std::sync::{Arc, Mutex};

use backup_store::store::ObjectStore;
use backup_store::store::s3::{S3Config, S3Credentials, S3Store};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Answers POST ?delete with 501 NotImplemented and DELETE with 204, recording deleted paths.
async fn refusing_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let deleted = Arc::new(Mutex::new(Vec::new()));
    let log = deleted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(socket);
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0usize;
                    loop {
                        let mut header = String::new();
                        reader.read_line(&mut header).await.unwrap();
                        let header = header.trim_end().to_ascii_lowercase();
                        if header.is_empty() {
                            break;
                        }
                        if let Some(v) = header.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0u8; length];
                    reader.read_exact(&mut body).await.unwrap();
                    let mut parts = request_line.split_whitespace();
                    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                    let response = if method == "POST" && path.contains("delete") {
                        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NotImplemented</Code>\
                                   <Message>bulk delete is not supported</Message></Error>";
                        format!(
                            "HTTP/1.1 501 Not Implemented\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{xml}",
                            xml.len()
                        )
                    } else if method == "DELETE" {
                        let path = path.split('?').next().unwrap_or(path);
                        log.lock().unwrap().push(path.to_string());
                        "HTTP/1.1 204 No Content\r\n\r\n".to_string()
                    } else {
                        "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n".to_string()
                    };
                    reader
                        .get_mut()
                        .write_all(response.as_bytes())
                        .await
                        .unwrap();
                }
            });
        }
    });
    (endpoint, deleted)
}

#[tokio::test(flavor = "multi_thread")]
async fn bulk_delete_refused_falls_back_to_single_deletes() {
    let (endpoint, deleted) = refusing_server().await;
    let store = S3Store::new(S3Config {
        bucket: "b".into(),
        endpoint: Some(endpoint),
        region: "us-east-1".into(),
        force_path_style: true,
        credentials: Some(S3Credentials {
            access_key_id: "k".into(),
            secret_access_key: "s".into(),
        }),
        ca_bundle: None,
    })
    .await
    .unwrap();
    let keys: Vec<String> = (0..5).map(|i| format!("ns/db/b1/file-{i}")).collect();
    store.delete_many(&keys).await.unwrap();
    let deleted = deleted.lock().unwrap().clone();
    let expected: Vec<String> = keys.iter().map(|k| format!("/b/{k}")).collect();
    assert_eq!(deleted, expected);
}
