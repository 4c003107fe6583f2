//! `kubectl tusk status NAME`: fetch (here) → [`summary::summarize`] → [`render::render`] or
//! JSON. Only this file talks to the API server.

pub mod render;
pub mod summary;
#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::jiff::Timestamp;
use kube::Client;

use crate::cluster::{
    backups_of, children_selector, database_pods_selector, events_about, get_postgresql, list,
    pooler_pods_selector,
};
use crate::error::{Error, Result};
use summary::Fetched;

/// Output format of `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// Everything the screen shows about `namespace/name`.
pub async fn fetch(client: &Client, namespace: &str, name: &str) -> Result<Fetched> {
    let pg = get_postgresql(client, namespace, name).await?;
    let backups = backups_of(client, namespace, name).await?;
    Ok(Fetched {
        pods: list::<Pod>(client, namespace, &database_pods_selector(name)).await?,
        pooler_pods: match pg.spec.pooler {
            Some(_) => list::<Pod>(client, namespace, &pooler_pods_selector(name)).await?,
            None => Vec::new(),
        },
        services: list::<Service>(client, namespace, &children_selector(name)).await?,
        events: events_about(client, namespace, name, &backups).await?,
        backups,
        pg,
    })
}

/// The screen (or its JSON) for `namespace/name`, now.
pub async fn run(client: &Client, namespace: &str, name: &str, output: Output) -> Result<String> {
    let fetched = fetch(client, namespace, name).await?;
    let summary = summary::summarize(&fetched, Timestamp::now());
    match output {
        Output::Text => Ok(render::render(&summary)),
        Output::Json => serde_json::to_string_pretty(&summary)
            .map(|json| json + "\n")
            .map_err(Error::encode("status as JSON")),
    }
}
