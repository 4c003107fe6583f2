//! Who may read `/status` and `/metrics`: whoever presents the cluster's status token
//! (`Authorization: Bearer …`), which the operator keeps in Secret `<cluster>-monitoring` and
//! mounts here as a file. A token, not the operator's client certificate: it works the same
//! with certificates the user brings (whose CA key the operator never holds), and Prometheus
//! presents one from a Secret without a certificate of its own. The file is read at each
//! request, so a token replaced in the Secret is accepted once the kubelet has swapped the file.

use std::path::PathBuf;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

/// The mounted token file.
#[derive(Clone, Debug)]
pub struct StatusToken {
    file: PathBuf,
}

/// Equal contents in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl StatusToken {
    pub fn new(file: PathBuf) -> Self {
        Self { file }
    }

    /// Whether `headers` carry the token. No token file (or an empty one) admits no one:
    /// a missing Secret must not open the port.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(presented) = headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
        else {
            return false;
        };
        let expected = match std::fs::read_to_string(&self.file) {
            Ok(token) => token,
            Err(e) => {
                tracing::warn!(error = %e, file = %self.file.display(), "status token unreadable: /status and /metrics refuse every request");
                return false;
            }
        };
        let expected = expected.trim();
        !expected.is_empty() && same(presented.trim().as_bytes(), expected.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, value.parse().unwrap());
        headers
    }

    #[test]
    fn only_the_mounted_token_is_admitted_and_a_replaced_one_follows() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        let token = StatusToken::new(file.clone());
        assert!(!token.admits(&headers("Bearer abc")), "no file: no one");
        std::fs::write(&file, "").unwrap();
        assert!(
            !token.admits(&headers("Bearer ")),
            "an empty token admits no one"
        );
        std::fs::write(&file, "s3cret\n").unwrap();
        assert!(token.admits(&headers("Bearer s3cret")));
        assert!(!token.admits(&headers("Bearer s3cre")));
        assert!(!token.admits(&headers("Bearer s3cret-and-more")));
        assert!(!token.admits(&headers("Basic s3cret")));
        assert!(!token.admits(&HeaderMap::new()));
        std::fs::write(&file, "rotated").unwrap();
        assert!(!token.admits(&headers("Bearer s3cret")));
        assert!(token.admits(&headers("Bearer rotated")));
    }
}
