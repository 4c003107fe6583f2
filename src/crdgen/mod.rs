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
