//! Every file in samples/ is usable verbatim: each PostgreSQL in it decodes into the API types
//! and passes the same CEL rules the API server enforces, and the operator's own validation.

use std::path::Path;

use serde_json::Value;
use tusk::clusters::validate::validate;
use tusk::{Backup, PostgreSQL};

#[test]
fn every_sample_passes_validation() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples");
    let (mut clusters, mut backups) = (0, 0);
    for entry in std::fs::read_dir(&dir).expect("samples/ exists") {
        let path = entry.expect("readable entry").path();
        let text = std::fs::read_to_string(&path).expect("readable sample");
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text).expect("sample is YAML");
        for document in documents {
            if document["kind"] == "Backup" {
                let name = format!("{} in {}", document["metadata"]["name"], path.display());
                let backup: Backup =
                    serde_json::from_value(document).unwrap_or_else(|e| panic!("{name}: {e}"));
                kube::core::cel::validate_cel(&backup).unwrap_or_else(|e| panic!("{name}: {e}"));
                backups += 1;
                continue;
            }
            if document["kind"] != "PostgreSQL" {
                continue;
            }
            let name = format!("{} in {}", document["metadata"]["name"], path.display());
            let mut pg: PostgreSQL =
                serde_json::from_value(document).unwrap_or_else(|e| panic!("{name}: {e}"));
            pg.metadata.namespace = Some("default".to_owned());
            kube::core::cel::validate_cel(&pg).unwrap_or_else(|e| panic!("{name}: {e}"));
            validate(&pg.spec).unwrap_or_else(|e| panic!("{name}: {e}"));
            clusters += 1;
        }
    }
    assert!(clusters >= 4, "found {clusters} clusters in samples/");
    assert!(backups >= 1, "found {backups} Backups in samples/");
}
