//! `spec.tls`: certificates the user brings instead of the ones Tusk issues.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Certificates from elsewhere (cert-manager, a company CA). With `serverSecret` set, Tusk
/// issues no CA and no server certificate for the cluster: PostgreSQL presents the named
/// Secret's, and the credentials Secrets carry its `ca.crt`.
#[derive(KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// A Secret of the cluster's namespace with `tls.crt`, `tls.key` and `ca.crt` (what
    /// cert-manager writes). Its certificate must name what clients dial (`<name>-rw`,
    /// `<name>-ro`, `<name>-r`, each pod's `<name>-N.<name>-hl`, short or qualified) and its
    /// key must be unencrypted. Renewals are followed: the pods reload PostgreSQL when the
    /// mounted files change (the kubelet refreshes them within about a minute) and the
    /// credentials take a new `ca.crt` within a minute. Changing the name rolls the pods.
    #[x_kube(validation = kube::core::Rule::new("self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$') && self.size() <= 253").message("spec.tls.serverSecret must be a Secret name"))]
    pub server_secret: String,
}
