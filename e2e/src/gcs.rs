//! GCS backups through the operator: fake-gcs-server behind tusk-testkit's gateway, which lets a
//! request through only with a token it issued for a JWT signed by the scenario's own
//! service-account key, so a key that is ignored or wrong fails. The operator and the agents the
//! L4 job runner starts take GCS's endpoint from e2e/local (TUSK_GCS_ENDPOINT: operator.sh
//! chooses it, jobrunner.py gives it to agents); the gateway binds exactly there.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tusk_testkit::fakegcs;
use tusk_testkit::gcs_auth::{Gateway, ServiceAccount};
use tusk_testkit::process::Emulator;

use crate::{Context, Ctx, Failure, Level, Result, absent};

/// The emulator's bucket the GCS scenarios back up to.
pub const BUCKET: &str = "tusk-backups";
/// The prefix of every GCS destination the scenarios write.
pub const PATH: &str = "gcs";

/// fake-gcs-server and the key-checking gateway in front of it, stopped when dropped.
pub struct Gcs {
    emulator: Emulator,
    pub gateway: Gateway,
}

impl Ctx {
    /// Starts the emulator and the gateway at the operator's GCS endpoint; a skip where there
    /// is none of ours (only e2e/local's L4 runs the agents where that endpoint is reachable).
    pub async fn start_gcs(&self) -> Result<Gcs> {
        self.require_l4()?;
        let Some(endpoint) = self.settings.gcs_endpoint.as_deref() else {
            if !self.platform.operator_on_this_host() {
                return Err(absent(
                    Level::OperatorProcess,
                    "the GCS emulator at the operator's endpoint (e2e/local's L4)",
                ));
            }
            crate::fail!(
                "no GCS endpoint of the suite's: e2e/local/operator.sh records the operator's"
            );
        };
        let addr = endpoint.trim_start_matches("http://");
        let (listener, endpoint) = Gateway::bind_at(addr)
            .await
            .context(format!("binding the GCS gateway at {addr}"))?;
        let emulator = fakegcs::start(&endpoint).await;
        fakegcs::create_bucket(&emulator, BUCKET).await;
        let gateway = Gateway::serve(listener, endpoint, &emulator.endpoint);
        Ok(Gcs { emulator, gateway })
    }

    /// Secret `name` holding `key_json` as `key.json`, as a user creates it from Google's file.
    pub async fn create_key_secret_in(&self, ns: &str, name: &str, key_json: &str) -> Result {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            data: Some([("key.json".into(), ByteString(key_json.as_bytes().to_vec()))].into()),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), &secret)
            .await
            .context(format!("creating Secret {ns}/{name}"))?;
        Ok(())
    }

    /// The objects of cluster `cluster` in `ns`, listed on the emulator itself.
    pub async fn gcs_keys(&self, gcs: &Gcs, ns: &str, cluster: &str) -> Result<Vec<String>> {
        gcs.keys(&format!("{PATH}/{ns}/{cluster}/")).await
    }
}

impl Gcs {
    /// The service-account key the token endpoint accepts, as JSON.
    pub fn key_json(&self) -> &str {
        &self.gateway.account.json
    }

    /// Another key for the same account and token endpoint, whose signatures do not verify.
    pub fn wrong_key(&self) -> ServiceAccount {
        ServiceAccount::generate(&format!("{}/token", self.gateway.endpoint))
    }

    /// Every object name under `prefix`, from the emulator's API (not through the gateway).
    pub async fn keys(&self, prefix: &str) -> Result<Vec<String>> {
        fakegcs::list(&self.emulator, BUCKET, prefix)
            .await
            .map_err(Failure::Fail)
    }

    /// The gateway's counters, for messages: tokens issued, grants and requests refused.
    pub fn counters(&self) -> String {
        format!(
            "{} token(s) issued, {} token request(s) rejected, {} storage request(s) refused",
            self.gateway.verified(),
            self.gateway.rejected(),
            self.gateway.refused()
        )
    }
}

/// A small PostgreSQL 18 backing up to the emulator's bucket under [`PATH`], keeping `keep`,
/// with the service-account key of Secret `secret` (key `key.json`).
pub fn cluster(name: &str, keep: u32, on_delete: &str, secret: &str) -> String {
    crate::manifests::cluster(name, None)
        + &format!(
            "  backup:
    schedule: \"0 2 * * *\"
    retention: {{keep: {keep}}}
    onDelete: {on_delete}
    destination:
      gcs:
        bucket: {BUCKET}
        path: {PATH}
        credentials:
          serviceAccountKey: {{name: {secret}, key: key.json}}
"
        )
}
