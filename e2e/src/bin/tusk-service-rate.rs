//! How fast the API server creates Services, with and without a ClusterIP: the baseline under
//! the scale benchmark's "every child created" (each cluster has three ClusterIP Services,
//! `-rw`, `-ro` and `-r`, and a headless one). Creates COUNT Services of each kind, CONCURRENCY
//! requests at a time, in a namespace of its own, and prints the rate and the latencies;
//! deletes the namespace at the end. Run by scripts/bench-services.sh on a fresh control plane.
//!   KUBECONFIG=… tusk-service-rate [--count 3000] [--concurrency 16]

use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

#[derive(Parser)]
struct Args {
    /// Services of each kind.
    #[arg(long, default_value_t = 3000)]
    count: usize,
    /// Create requests in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

fn service(name: String, headless: bool) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: headless.then(|| "None".to_owned()),
            selector: Some([("app".to_owned(), "none".to_owned())].into()),
            ports: Some(vec![ServicePort {
                port: 5432,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Creates `count` Services, `concurrency` at a time; the whole time and each request's.
async fn create(
    api: &Api<Service>,
    count: usize,
    concurrency: usize,
    headless: bool,
) -> Result<(Duration, Vec<Duration>), kube::Error> {
    let kind = if headless { "headless" } else { "clusterip" };
    let started = Instant::now();
    let latencies = futures::stream::iter(0..count)
        .map(|i| async move {
            let at = Instant::now();
            let made = service(format!("{kind}-{i}"), headless);
            api.create(&PostParams::default(), &made).await?;
            Ok::<_, kube::Error>(at.elapsed())
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    Ok((started.elapsed(), latencies))
}

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let at = ((sorted.len().saturating_sub(1)) as f64 * q).round() as usize;
    sorted.get(at).map_or(0.0, Duration::as_secs_f64)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let client = Client::try_default().await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = format!("service-rate-{}", std::process::id());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await?;
    let api: Api<Service> = Api::namespaced(client, &ns);
    println!(
        "| Services created, {} at once | count | seconds | per second | p50 s | p90 s | p99 s |",
        args.concurrency
    );
    println!("|---|---|---|---|---|---|---|");
    for headless in [false, true] {
        let (took, mut latencies) = create(&api, args.count, args.concurrency, headless).await?;
        latencies.sort();
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.3} | {:.3} | {:.3} |",
            if headless {
                "headless (clusterIP: None)"
            } else {
                "with a ClusterIP"
            },
            args.count,
            took.as_secs_f64(),
            args.count as f64 / took.as_secs_f64(),
            quantile(&latencies, 0.5),
            quantile(&latencies, 0.9),
            quantile(&latencies, 0.99),
        );
    }
    namespaces.delete(&ns, &DeleteParams::default()).await?;
    Ok(())
}
