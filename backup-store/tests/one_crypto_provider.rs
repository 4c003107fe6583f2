//! Nothing in Tusk installs a rustls crypto provider by hand: kube's TLS and this crate's (S3,
//! GCS) all use ring, and rustls picks the only provider compiled in. A dependency that brought
//! in a second one (aws-lc-rs is many crates' default) would make the operator and the agent
//! panic at their first TLS connection; this catches it in any workspace test run.

#[test]
fn rustls_finds_its_one_provider_by_itself() {
    // Panics when no provider, or more than one, is compiled in.
    let _ = rustls::ClientConfig::builder();
    assert!(rustls::crypto::CryptoProvider::get_default().is_some());
}
