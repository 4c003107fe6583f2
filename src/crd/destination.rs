//! Where backups live: one S3-compatible bucket or one Google Cloud Storage bucket.

use backup_store::names;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::rules;

const PATH_MESSAGE: &str = "must be a relative prefix of at most 1024 characters: no leading '/', no empty, '.' or '..' segments";

/// Exactly one object store. Objects are written under `<path>/<namespace>/<cluster>/<backupId>/`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.s3) != has(self.gcs)").message("exactly one of s3 or gcs must be set"))]
pub struct Destination {
    /// Amazon S3 or an S3-compatible store such as MinIO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Destination>,
    /// Google Cloud Storage, authenticated with a service-account key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<GcsDestination>,
}

/// An S3 bucket, on AWS or any S3-compatible endpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.caBundle) || (has(self.endpoint) && self.endpoint.startsWith('https://'))").message("caBundle needs an https:// endpoint"))]
pub struct S3Destination {
    /// Bucket name (3 to 63 lowercase letters, digits, dots and hyphens). It must already exist.
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$')").message("must be a valid bucket name: 3-63 lowercase letters, digits, '.' and '-'"))]
    #[schemars(length(max = 222))]
    pub bucket: String,
    /// Prefix inside the bucket, without leading slash; empty means the bucket root.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[x_kube(validation = Rule::new(rules::name(names::PATH)).message(PATH_MESSAGE))]
    #[schemars(length(max = 1024))]
    pub path: String,
    /// Endpoint URL for S3-compatible stores, e.g. `http://minio.minio.svc:9000`. Empty for AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^https?://[^/\\\\s]+(/.*)?$')").message("must be an http:// or https:// URL"))]
    #[schemars(length(max = 2048))]
    pub endpoint: Option<String>,
    /// Region of the bucket; S3-compatible stores usually accept any value.
    #[serde(default = "default_region")]
    #[schemars(length(max = 64))]
    pub region: String,
    /// Address buckets as `<endpoint>/<bucket>` instead of `<bucket>.<endpoint>`; MinIO needs this.
    #[serde(default)]
    pub force_path_style: bool,
    /// Static credentials from a Secret. Leave unset to use the default AWS credential chain
    /// (for example IRSA on EKS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<S3Credentials>,
    /// PEM certificates of the CA that signed an `https://` endpoint's certificate (a private
    /// CA, common for MinIO); trusted in addition to the public roots by the operator and the
    /// backup Jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<CaBundle>,
}

/// Where a CA bundle is read from: exactly one key of a Secret or a ConfigMap in the cluster's
/// namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.secretKeyRef) != has(self.configMapKeyRef)").message("exactly one of secretKeyRef or configMapKeyRef must be set"))]
pub struct CaBundle {
    /// A key of a Secret holding the PEM bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeyRef>,
    /// A key of a ConfigMap holding the PEM bundle (e.g. one filled by trust-manager).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<SecretKeyRef>,
}

fn default_region() -> String {
    "us-east-1".to_owned()
}

/// Static S3 credentials, each read from a key of a Secret in the cluster's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Credentials {
    /// The access key id.
    pub access_key_id: SecretKeyRef,
    /// The secret access key.
    pub secret_access_key: SecretKeyRef,
}

/// A Google Cloud Storage bucket.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcsDestination {
    /// Bucket name. It must already exist.
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$')").message("must be a valid bucket name: lowercase letters, digits, '.', '_' and '-'"))]
    #[schemars(length(max = 222))]
    pub bucket: String,
    /// Prefix inside the bucket, without leading slash; empty means the bucket root.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[x_kube(validation = Rule::new(rules::name(names::PATH)).message(PATH_MESSAGE))]
    #[schemars(length(max = 1024))]
    pub path: String,
    /// Credentials; leave unset to use Workload Identity / application default credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<GcsCredentials>,
}

/// Google Cloud credentials read from a Secret in the cluster's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcsCredentials {
    /// A service-account key (the JSON file `gcloud iam service-accounts keys create` writes).
    pub service_account_key: SecretKeyRef,
}

/// One key of a Secret (or, for a CA bundle, a ConfigMap) in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[x_kube(validation = Rule::new(rules::matches(rules::DNS_SUBDOMAIN)).message("must be a Secret name: lowercase letters, digits, '-' and '.'"))]
    #[schemars(length(max = 253))]
    pub name: String,
    /// Key inside the Secret.
    #[x_kube(validation = Rule::new("self.matches('^[-._a-zA-Z0-9]+$') && self != '.' && !self.startsWith('..')").message("must be a Secret key: letters, digits, '-', '_' and '.', not '.' or starting with '..'"))]
    #[schemars(length(max = 253))]
    pub key: String,
}

#[cfg(test)]
mod tests {
    use kube::core::cel::validate_cel;
    use serde_json::{Value, json};

    use crate::crd::fixtures;

    /// The CEL messages for a cluster backing up to `s3`.
    fn cel_errors(s3: Value) -> Vec<String> {
        let spec = json!({"storage": {"size": "1Gi"}, "backup": {
            "schedule": "0 2 * * *", "destination": {"s3": s3}}});
        let pg = fixtures::postgresql("prod", "demo", spec, Value::Null);
        match validate_cel(&pg) {
            Ok(()) => vec![],
            Err(errs) => errs.as_slice().iter().map(|e| e.message.clone()).collect(),
        }
    }

    #[test]
    fn a_ca_bundle_needs_exactly_one_source_and_an_https_endpoint() {
        let secret = json!({"secretKeyRef": {"name": "minio-ca", "key": "ca.crt"}});
        let https = "https://minio.minio.svc:9000";
        let ok = cel_errors(json!({"bucket": "backups", "endpoint": https, "caBundle": secret}));
        assert_eq!(ok, Vec::<String>::new());
        let config_map = json!({"configMapKeyRef": {"name": "trust", "key": "ca.pem"}});
        let ok =
            cel_errors(json!({"bucket": "backups", "endpoint": https, "caBundle": config_map}));
        assert_eq!(ok, Vec::<String>::new());

        let both = json!({"secretKeyRef": {"name": "a", "key": "b"},
                          "configMapKeyRef": {"name": "c", "key": "d"}});
        for (bundle, endpoint, message) in [
            (
                both,
                https,
                "exactly one of secretKeyRef or configMapKeyRef",
            ),
            (
                json!({}),
                https,
                "exactly one of secretKeyRef or configMapKeyRef",
            ),
            (
                secret.clone(),
                "http://minio:9000",
                "caBundle needs an https:// endpoint",
            ),
        ] {
            let errors =
                cel_errors(json!({"bucket": "backups", "endpoint": endpoint, "caBundle": bundle}));
            assert!(
                errors.iter().any(|e| e.contains(message)),
                "{endpoint}: {errors:?}"
            );
        }
        let no_endpoint = cel_errors(json!({"bucket": "backups", "caBundle": secret}));
        assert!(
            no_endpoint.iter().any(|e| e.contains("https://")),
            "{no_endpoint:?}"
        );
    }
}
