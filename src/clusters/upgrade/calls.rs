//! The managers' upgrade endpoints as the executor calls them: the old primary's
//! (`tusk_contract::upgrade`, `upgrade_source`) and the new set's primary's (`upgrade_target`),
//! each a typed request through [`StatusSource::upgrade_request`] (TLS by the cluster's CA, the
//! status token). A manager that does not answer, or answers other than 2xx, is an
//! [`Error::Upgrade`] naming the step and the pod; the reconcile retries it.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tusk_contract::upgrade::{PREFLIGHT_PATH, UpgradePreflight};
use tusk_contract::upgrade_source::{
    CONFIRMED_PATH, ConfirmRequest, Confirmation, FREEZE_PATH, Frozen, PUBLISH_PATH, Published,
    THAW_PATH, UNPUBLISH_PATH, UnpublishRequest,
};
use tusk_contract::upgrade_target::{
    COPY_PATH, CopyProgress, CopyRequest, FINISH_PATH, Finished, PROGRESS_PATH,
};

use crate::error::{Error, Result};
use crate::runtime::Context;
use crate::runtime::instances::{InstanceAddress, UpgradeRequest};

/// One manager, reachable.
pub struct Manager<'a> {
    pub ctx: &'a Context,
    pub address: InstanceAddress,
}

impl Manager<'_> {
    pub async fn preflight(&self) -> Result<UpgradePreflight> {
        self.call("preflight", UpgradeRequest::get(PREFLIGHT_PATH))
            .await
    }

    pub async fn publish(&self) -> Result<Published> {
        self.post("publish", PUBLISH_PATH, &()).await
    }

    pub async fn freeze(&self) -> Result<Frozen> {
        self.post("freeze", FREEZE_PATH, &()).await
    }

    pub async fn confirmed(&self, lsn: &str) -> Result<Confirmation> {
        let request = ConfirmRequest {
            lsn: lsn.to_owned(),
        };
        self.post("confirm", CONFIRMED_PATH, &request).await
    }

    pub async fn thaw(&self) -> Result<serde_json::Value> {
        self.post("thaw", THAW_PATH, &()).await
    }

    /// `subscriber`: the new side's system identifier, whose table synchronisation slots go too.
    pub async fn unpublish(&self, subscriber: Option<String>) -> Result<serde_json::Value> {
        let request = UnpublishRequest { subscriber };
        self.post("unpublish", UNPUBLISH_PATH, &request).await
    }

    pub async fn copy(&self, request: &CopyRequest) -> Result<serde_json::Value> {
        self.post("copy", COPY_PATH, request).await
    }

    pub async fn progress(&self) -> Result<CopyProgress> {
        self.call("progress", UpgradeRequest::get(PROGRESS_PATH))
            .await
    }

    pub async fn finish(&self, request: &CopyRequest) -> Result<Finished> {
        self.post("finish", FINISH_PATH, request).await
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        step: &'static str,
        path: &'static str,
        body: &B,
    ) -> Result<T> {
        let body = serde_json::to_string(body).map_err(|e| self.failed(step, e.to_string()))?;
        self.call(step, UpgradeRequest::post(path, body)).await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        step: &'static str,
        request: UpgradeRequest,
    ) -> Result<T> {
        let answer = (self
            .ctx
            .instances
            .upgrade_request(&self.address, &request)
            .await)
            .ok_or_else(|| self.failed(step, "no answer".to_owned()))?;
        if !(200..300).contains(&answer.status) {
            let reason = format!("{} {}", answer.status, answer.body.trim());
            return Err(self.failed(step, reason));
        }
        // An empty body (a step with nothing to say) reads as JSON null.
        let body = match answer.body.trim() {
            "" => "null",
            body => body,
        };
        serde_json::from_str(body).map_err(|e| self.failed(step, format!("its answer: {e}")))
    }

    fn failed(&self, step: &'static str, reason: String) -> Error {
        Error::Upgrade {
            step,
            pod: self.address.pod.clone(),
            reason,
        }
    }
}
