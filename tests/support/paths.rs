//! The API paths the scenarios expect, all in namespace `prod` and for cluster `demo`.

pub const SECRETS: &str = "/api/v1/namespaces/prod/secrets";
pub const CONFIG_MAPS: &str = "/api/v1/namespaces/prod/configmaps";
pub const SERVICES: &str = "/api/v1/namespaces/prod/services";
pub const STATEFULSETS: &str = "/apis/apps/v1/namespaces/prod/statefulsets";
pub const CRONJOBS: &str = "/apis/batch/v1/namespaces/prod/cronjobs";
pub const JOBS: &str = "/apis/batch/v1/namespaces/prod/jobs";
pub const BACKUPS: &str = "/apis/tusk.dev/v1alpha1/namespaces/prod/backups";
pub const CLUSTER: &str = "/apis/tusk.dev/v1alpha1/namespaces/prod/postgresqls/demo";
pub const STATUS: &str = "/apis/tusk.dev/v1alpha1/namespaces/prod/postgresqls/demo/status";
pub const NIGHTLY_STATUS: &str = "/apis/tusk.dev/v1alpha1/namespaces/prod/backups/nightly/status";
pub const SERVICE_ACCOUNTS: &str = "/api/v1/namespaces/prod/serviceaccounts";
pub const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/prod/roles";
pub const ROLE_BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/prod/rolebindings";
pub const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/prod/leases";
pub const PODS: &str = "/api/v1/namespaces/prod/pods";
pub const NETWORK_POLICIES: &str = "/apis/networking.k8s.io/v1/namespaces/prod/networkpolicies";
/// `-rw`'s EndpointSlice, which the operator writes (the Service has no selector).
pub const RW_SLICE: &str = "/apis/discovery.k8s.io/v1/namespaces/prod/endpointslices/demo-rw";
pub const RO_SLICE: &str = "/apis/discovery.k8s.io/v1/namespaces/prod/endpointslices/demo-ro";
pub const ANY_SLICE: &str = "/apis/discovery.k8s.io/v1/namespaces/prod/endpointslices/demo-r";
