//! The shipped samples (samples/*.yaml), applied as a user would.

use std::path::PathBuf;

use crate::{Context, Ctx, Result, say};

impl Ctx {
    /// Every file of samples/, in name order.
    pub fn sample_files(&self) -> Result<Vec<PathBuf>> {
        let dir = self.settings.repo.join("samples");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .context(format!("reading {}", dir.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        Ok(files)
    }

    /// Applies one file of samples/ (e.g. "backup.yaml") into the scenario's namespace.
    pub async fn apply_sample(&self, file: &str) -> Result<Vec<(String, String)>> {
        let path = self.settings.repo.join("samples").join(file);
        let yaml = std::fs::read_to_string(&path).context(format!("reading {}", path.display()))?;
        self.apply(&yaml)
            .await
            .context(format!("samples/{file} does not apply"))
    }

    /// Applies every sample (with the GCS key Secret they refer to but do not ship) and
    /// returns the names of the PostgreSQL clusters among them.
    pub async fn apply_samples(&self) -> Result<Vec<String>> {
        self.apply(
            "apiVersion: v1
kind: Secret
metadata: {name: gcs-backup-key}
stringData: {key.json: '{\"type\":\"service_account\"}'}
",
        )
        .await?;
        let mut clusters = Vec::new();
        for path in self.sample_files()? {
            let file = path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let applied = self.apply_sample(&file).await?;
            let names: Vec<String> = applied
                .iter()
                .map(|(kind, name)| format!("{kind}/{name}"))
                .collect();
            say(format!("samples/{file}: {}", names.join(" ")));
            clusters.extend(
                applied
                    .into_iter()
                    .filter(|(kind, _)| kind == "PostgreSQL")
                    .map(|(_, name)| name),
            );
        }
        Ok(clusters)
    }
}
