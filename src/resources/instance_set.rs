//! The sets of instances of a cluster (docs/src/design/major-upgrades.md): the serving set
//! (`status.instanceSet`, else the cluster's name) names the StatefulSet, its pods and its
//! Lease; during a major-version upgrade a new set runs beside it until the switch.

use std::collections::BTreeMap;

use super::{Cluster, Component, INSTANCE_SET_LABEL, postgres_image};

impl<'a> Cluster<'a> {
    /// The view of set `set` of this cluster: the upgrade's new set, on the spec's image.
    pub fn set(&self, set: &'a str) -> Cluster<'a> {
        Cluster {
            instance_set: set,
            incoming_set: None,
            serving_image: None,
            serving_major: self.spec.version.major(),
            stopped_for_upgrade: false,
            primary: None,
            ..self.clone()
        }
    }

    /// The sets whose pods exist: the serving one, and an upgrade's new one beside it.
    pub fn sets(&self) -> Vec<&'a str> {
        std::iter::once(self.instance_set)
            .chain(self.incoming_set)
            .collect()
    }

    /// The PostgreSQL image this set's pods run.
    pub fn postgres_image(&self) -> String {
        self.serving_image
            .map_or_else(|| postgres_image(self.spec), str::to_owned)
    }

    /// The selector of this set's StatefulSet and its pods' labels: the database pods', and
    /// [`INSTANCE_SET_LABEL`] for a set not named after the cluster.
    pub fn set_selector_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.selector_labels(Component::Database);
        if self.instance_set != self.name {
            labels.insert(INSTANCE_SET_LABEL.to_owned(), self.instance_set.to_owned());
        }
        labels
    }

    /// The serving set's StatefulSet: the set's name.
    pub fn statefulset_name(&self) -> String {
        self.instance_set.to_owned()
    }

    /// Lease `<set>-primary` (`<name>-primary` for a cluster's first set): its holder is the
    /// only instance of the set that may run as primary.
    pub fn lease_name(&self) -> String {
        format!("{}-primary", self.instance_set)
    }

    /// The Leases of [`Self::sets`]: the pods' Role names each.
    pub fn lease_names(&self) -> Vec<String> {
        (self.sets().iter())
            .map(|set| format!("{set}-primary"))
            .collect()
    }

    /// How many pods the StatefulSet keeps: `spec.instances`, unless the primary sits on an
    /// ordinal that lowering `instances` removes — then up to it, until a switchover has moved
    /// the primary to a kept ordinal (scale-down never takes the primary's pod).
    pub fn kept_pods(&self) -> i32 {
        let primary_ordinal = self.primary.and_then(|pod| self.ordinal(pod));
        let instances = self.spec.instances.max(1);
        primary_ordinal.map_or(instances, |ordinal| instances.max(ordinal + 1))
    }

    /// Ordinal of a database pod of the serving set, from its name.
    pub fn ordinal(&self, pod: &str) -> Option<i32> {
        pod.strip_prefix(self.instance_set)?
            .strip_prefix('-')?
            .parse()
            .ok()
    }

    /// Names of the database pods, ordinal 0 first.
    pub fn pod_names(&self) -> Vec<String> {
        (0..self.spec.instances.max(1))
            .map(|ordinal| format!("{}-{ordinal}", self.statefulset_name()))
            .collect()
    }
}
