//! ConfigMap `<name>-ca.crt`: the CA bundle a client needs to verify the server, published
//! without a key. Before it, trusting the cluster meant reading Secret `<name>-server-tls` (the
//! server's private key beside `ca.crt`) or an app Secret (a password beside it). It follows the
//! server Secret's `ca.crt` through every step of a CA rotation, as the app Secrets do.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;

use super::tls::CA_CRT;
use super::{Cluster, Component};

/// ConfigMap `<name>-ca.crt` holding `ca_bundle` under `ca.crt`.
pub fn published_ca(cluster: &Cluster, ca_bundle: &str) -> ConfigMap {
    ConfigMap {
        metadata: cluster.child_meta(cluster.published_ca_name(), Component::Credentials),
        data: Some(BTreeMap::from([(CA_CRT.to_owned(), ca_bundle.to_owned())])),
        ..ConfigMap::default()
    }
}

/// The bundle a published ConfigMap (as JSON, the packed cache's form) holds.
pub fn published_ca_bundle(config_map: &Value) -> Option<&str> {
    config_map.get("data")?.get(CA_CRT)?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::*;

    #[test]
    fn the_bundle_alone_is_published_under_ca_crt() {
        let pg = postgresql(MINIMAL);
        let cluster = Cluster::new(&pg).unwrap();
        let config_map = published_ca(&cluster, "-----BEGIN CERTIFICATE-----\n");
        assert_eq!(config_map.metadata.name.as_deref(), Some("demo-ca.crt"));
        let json = serde_json::to_value(&config_map).unwrap();
        assert_eq!(json["data"].as_object().unwrap().len(), 1);
        assert_eq!(
            published_ca_bundle(&json),
            Some("-----BEGIN CERTIFICATE-----\n")
        );
        assert!(config_map.binary_data.is_none());
    }
}
