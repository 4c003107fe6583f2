//! Renders the CRDs generated from the Rust types as YAML, for `crds/` and `tusk crd`, and
//! as the API reference pages of the documentation (`reference`).

pub mod reference;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::crd::{Backup, PostgreSQL};

/// Every CRD Tusk installs, with the file name it has under `crds/`.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("postgresqls.tusk.dev.yaml", PostgreSQL::crd()),
        ("backups.tusk.dev.yaml", Backup::crd()),
    ]
}

/// One CRD as a YAML document.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(crd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `format` in the schemas is one the API server knows: it warns at install about
    /// any other (`uint32` from a `u32` field did), and the install scripts treat a warning as
    /// a failure.
    #[test]
    fn every_schema_format_is_one_the_api_server_recognises() {
        const KNOWN: &[&str] = &[
            "int32",
            "int64",
            "float",
            "double",
            "byte",
            "date",
            "date-time",
            "duration",
            "int-or-string",
            "password",
        ];
        for (file, crd) in all() {
            let yaml = to_yaml(&crd).expect("renders");
            for line in yaml.lines() {
                if let Some(format) = line.trim().strip_prefix("format: ") {
                    assert!(KNOWN.contains(&format), "{file}: format {format}");
                }
            }
        }
    }
}
