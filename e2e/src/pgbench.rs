//! pgbench from the host against a cluster, as its application owner over verified TLS: for
//! throughput figures that are printed, never asserted.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::{Context, Ctx, Result, fail};

/// The host's pgbench, if PostgreSQL's client programs are installed.
pub fn find() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| Some(entry.ok()?.path().join("bin/pgbench")))
        .filter(|path| path.is_file())
        .collect();
    found.sort();
    found.pop()
}

/// pgbench as the application owner of one cluster.
pub struct Bench {
    pgbench: PathBuf,
    user: String,
    password: String,
    database: String,
    ca_file: tempfile::NamedTempFile,
}

impl Bench {
    pub async fn new(ctx: &Ctx, cluster: &str, pgbench: &Path) -> Result<Self> {
        let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.ns);
        let ca = (config_maps.get(&format!("{cluster}-ca.crt")).await?.data)
            .and_then(|mut d| d.remove("ca.crt"))
            .context("no ca.crt published")?;
        let ca_file = tempfile::NamedTempFile::new().context("a file for the CA")?;
        std::fs::write(ca_file.path(), ca).context("writing the CA")?;
        let secret = format!("{cluster}-app");
        Ok(Self {
            pgbench: pgbench.to_owned(),
            user: ctx.secret_value(&secret, "username").await?,
            password: ctx.secret_value(&secret, "password").await?,
            database: ctx.secret_value(&secret, "dbname").await?,
            ca_file,
        })
    }

    async fn run(&self, host: &str, address: &str, args: &[&str]) -> Result<String> {
        let output = tokio::process::Command::new(&self.pgbench)
            .args(args)
            .env("PGHOST", host)
            .env("PGHOSTADDR", address)
            .env("PGPORT", "5432")
            .env("PGUSER", &self.user)
            .env("PGPASSWORD", &self.password)
            .env("PGDATABASE", &self.database)
            .env("PGSSLMODE", "verify-full")
            .env("PGSSLROOTCERT", self.ca_file.path())
            .output()
            .await
            .context("running pgbench")?;
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() {
            fail!(
                "pgbench {args:?} at {host}: {}\n{text}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(text)
    }

    /// `pgbench -i` (scale 1).
    pub async fn init(&self, host: &str, address: &str) -> Result {
        self.run(host, address, &["-i", "-q", "-s", "1"])
            .await
            .map(drop)
    }

    /// Transactions per second of `pgbench -S` with 8 clients for `seconds`.
    pub async fn select_only(&self, host: &str, address: &str, seconds: usize) -> Result<f64> {
        let seconds = seconds.to_string();
        let args = ["-S", "-n", "-c", "8", "-j", "2", "-T", seconds.as_str()];
        let text = self.run(host, address, &args).await?;
        tps(&text).context(format!("no tps in pgbench's output: {text}"))
    }
}

/// The `tps = …` figure of pgbench's report.
fn tps(report: &str) -> Option<f64> {
    report
        .lines()
        .find_map(|line| line.trim().strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_tps_figure_is_read_from_the_report() {
        let report =
            "latency average = 1.2 ms\ntps = 6543.210987 (without initial connection time)\n";
        assert_eq!(super::tps(report), Some(6543.210987));
    }
}
