{{/* Name of the operator's objects. */}}
{{- define "tusk.fullname" -}}
{{- default (printf "%s-operator" .Release.Name) .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tusk.serviceAccountName" -}}
{{- default (include "tusk.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "tusk.selectorLabels" -}}
app.kubernetes.io/name: tusk-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tusk.labels" -}}
{{ include "tusk.selectorLabels" . }}
app.kubernetes.io/part-of: tusk
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
RBAC on namespaced resources, derived from deploy/rbac.yaml (see the reasons there): granted by
the ClusterRole when every namespace is watched, by a Role in each watched namespace otherwise.
*/}}
{{- define "tusk.namespacedRules" -}}
- apiGroups: ["tusk.dev"]
  resources: ["postgresqls"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["tusk.dev"]
  resources: ["postgresqls/status"]
  verbs: ["patch"]
- apiGroups: ["tusk.dev"]
  resources: ["postgresqls/finalizers", "backups/finalizers"]
  verbs: ["update"]
- apiGroups: ["tusk.dev"]
  resources: ["backups"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["tusk.dev"]
  resources: ["backups/status"]
  verbs: ["patch"]
# Patch: a renewed server certificate and a new CA are written in place, and the credentials
# follow the CA and their own password, the verifiers follow the passwords. Never delete.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["list", "watch", "create", "patch"]
# A major-version upgrade deletes the retired (or cancelled) set's own ConfigMap; a client
# Service (-ro, -r) is deleted when spec.services disables it.
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["delete"]
# -rw's EndpointSlice is the operator's (its Service has no selector): written at each
# handover. Once per cluster of an earlier Tusk, what kube-controller-manager kept for -rw's
# selector is deleted: its Endpoints and its slices (deletecollection, by their labels), and
# the operator's own slice of a Service spec.services disables (by name and label).
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["list", "watch", "create", "patch", "deletecollection"]
- apiGroups: [""]
  resources: ["endpoints"]
  verbs: ["delete"]
# A major-version upgrade deletes the retired (or cancelled) instance set, its claims and its
# Lease (src/clusters/upgrade/sets.rs).
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Pods: the database pods are watched (readiness, IP) and patched for one label, their
# role (primary/replica), which the -rw and -ro Services select on, and deleted one at a
# time to roll a replicated cluster replicas-first (its StatefulSet uses OnDelete); a failed
# Job's pods are listed for their termination message.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "patch", "delete"]
# The database pods' identity: a ServiceAccount whose Role may get and update its cluster's
# Lease and create Events. Granting that Role needs the operator to hold those itself.
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["list", "watch", "create", "patch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["list", "watch", "create", "patch"]
# The primary Lease of each cluster: created once, read and handed over on failover; one
# switchover's Lease watched by name while it lasts. List and watch also so that it may
# grant them to the instances' and a pooler's Roles (on that one Lease).
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "create", "update", "delete"]
# With spec.pooler: the PgBouncer Deployment, deleted when the field goes.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["list", "watch", "create", "patch", "delete"]
# With spec.networkPolicy: the cluster's NetworkPolicy, deleted when the field goes.
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/* What stays cluster-wide in every mode: whether a claim's StorageClass allows expansion. */}}
{{- define "tusk.clusterRules" -}}
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["get"]
{{- end -}}

{{- define "tusk.subjects" -}}
- kind: ServiceAccount
  name: {{ include "tusk.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
