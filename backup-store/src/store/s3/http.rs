//! The S3 SDK's HTTPS client, with rustls on `ring`.
//!
//! The SDK's default client is the same hyper 1 + rustls stack on aws-lc-rs; with kube on ring
//! a binary would carry two providers, and rustls then needs one installed by hand before any
//! TLS connection. This builds what the default builds, only with ring.

use aws_sdk_s3::config::SharedHttpClient;
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_smithy_http_client::{Builder, ConnectorBuilder};

pub fn client() -> SharedHttpClient {
    Builder::new().build_with_connector_fn(|settings, components| {
        let mut connector =
            ConnectorBuilder::default().tls_provider(tls::Provider::Rustls(CryptoMode::Ring));
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        // As the default client does from behavior version 2025-08-07 on (we use the latest):
        // HTTP(S)_PROXY and NO_PROXY are honoured.
        connector.set_proxy_config(Some(ProxyConfig::from_env()));
        connector.build()
    })
}
