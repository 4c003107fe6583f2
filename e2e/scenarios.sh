#!/usr/bin/env bash
# End-to-end scenarios for Tusk, run against any cluster where deploy/ is installed and the
# operator runs: the local control plane of e2e/local/ (kwok nodes, operator as a process) or a
# real cluster (the operator as the Deployment of deploy/).
#
# Usage: e2e/scenarios.sh [SCENARIO...]      # all scenarios when none is named
#   kubectl must be on PATH and KUBECONFIG point at the cluster (as an admin).
#   E2E_TIMEOUT   seconds to wait for each condition (default 120; raise it for real pods)
#   E2E_HOOKS     a bash file overriding the platform hooks below (e2e/local/hooks.sh)
#   E2E_ARTIFACTS directory for the diagnostics of failed scenarios (default: a temp dir)
#   TUSK_E2E_L4=1 also run the L4 scenarios of e2e/scenarios-l4.sh (real bytes through the Jobs)
#
# Platform hooks (defaults: the operator is the Deployment tusk-system/tusk-operator):
#   operator_kill        SIGKILL the operator          operator_start  bring it back and wait
#   operator_logs        print its recent log          operator_metrics print its /metrics
#   pod_set_ready NS POD true|false   make a pod (un)ready; return 2 when the platform cannot
#   operator_writes_mark               print a mark in the operator's audit trail; return 2 when
#   operator_writes_since MARK         there is none; print its write requests since MARK
# A scenario step whose hook returns 2 is skipped, and the scenario reports SKIP.
# Predicates handed to wait_until are only invoked through it:
# shellcheck disable=SC2329
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
E2E_TIMEOUT=${E2E_TIMEOUT:-120}
E2E_REST_WINDOW=${E2E_REST_WINDOW:-20}
OPERATOR_SA="system:serviceaccount:tusk-system:tusk-operator"

# ---------------------------------------------------------------------------------------------
# Platform hooks: defaults for an operator running as the Deployment of deploy/.
operator_kill() {
  kubectl -n tusk-system delete pod -l app.kubernetes.io/name=tusk-operator --grace-period=0 --force --wait=false
}
operator_start() {
  wait_until "a new operator pod to be Ready" "$E2E_TIMEOUT" \
    kubectl -n tusk-system wait --for=condition=Ready pod -l app.kubernetes.io/name=tusk-operator --timeout=5s
}
operator_logs() { kubectl -n tusk-system logs deployment/tusk-operator --tail=300; }
operator_metrics() {
  kubectl get --raw "/api/v1/namespaces/tusk-system/services/tusk-operator-metrics:http/proxy/metrics"
}
pod_set_ready() { return 2; }
operator_writes_mark() { return 2; }
operator_writes_since() { return 2; }
if [[ -n "${E2E_HOOKS:-}" ]]; then
  # shellcheck disable=SC1090
  source "$E2E_HOOKS"
fi

# ---------------------------------------------------------------------------------------------
# Helpers
say() { echo "  $*"; }
fail() { echo "  FAILED: $*" >&2; exit 1; }
skip() { echo "  SKIPPED: $*" >&2; exit 3; }

# wait_until WHAT TIMEOUT COMMAND...: polls COMMAND until it succeeds; on timeout, says what it
# waited for and the command's last output.
wait_until() {
  local what=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout)) out
  until out=$("$@" 2>&1); do
    if ((SECONDS >= deadline)); then
      fail "timed out after ${timeout}s waiting for $what (last output: ${out:0:400})"
    fi
    sleep 0.5
  done
}

# A namespace per scenario, labelled so that the runner can find and remove it.
new_namespace() {
  kubectl delete namespace "$1" --ignore-not-found --wait=true --timeout="${E2E_TIMEOUT}s" >/dev/null
  kubectl create namespace "$1" >/dev/null
  kubectl label namespace "$1" e2e.tusk.dev/scenario=true >/dev/null
  # Pods can only be created once the namespace's default ServiceAccount exists.
  wait_until "ServiceAccount $1/default" "$E2E_TIMEOUT" kubectl -n "$1" get serviceaccount default
}
drop_namespace() { kubectl delete namespace "$@" --wait=false >/dev/null 2>&1 || true; }

# cluster NS NAME [BACKUP]: apply a small PostgreSQL; BACKUP=s3 adds a nightly backup to S3.
cluster() { cluster_yaml "$@" | kubectl apply -f - >/dev/null; }
cluster_yaml() {
  local ns=$1 name=$2 backup=${3:-}
  {
    cat <<YAML
apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {name: $name, namespace: $ns}
spec:
  version: "18"
  storage: {size: 1Gi}
YAML
    if [[ "$backup" == s3 ]]; then
      cat <<YAML
  backup:
    schedule: "0 2 * * *"
    retention: {keep: 3}
    destination:
      s3:
        bucket: tusk-backups
        path: e2e
        endpoint: http://minio.minio.svc.cluster.local:9000
        forcePathStyle: true
        credentials:
          accessKeyId: {name: e2e-s3, key: access-key}
          secretAccessKey: {name: e2e-s3, key: secret-key}
---
apiVersion: v1
kind: Secret
metadata: {name: e2e-s3, namespace: $ns}
stringData: {access-key: minioadmin, secret-key: minioadmin}
YAML
    fi
  }
}

wait_ready() { # NS NAME...
  local ns=$1; shift
  local name
  for name in "$@"; do
    kubectl -n "$ns" wait --for=condition=Ready "postgresql/$name" --timeout="${E2E_TIMEOUT}s" >/dev/null \
      || fail "postgresql $ns/$name did not become Ready: $(kubectl -n "$ns" get postgresql "$name" -o jsonpath='{.status.conditions}')"
  done
}

# children NS NAME: the kind/name of every child the operator keeps for cluster NAME.
children() {
  local ns=$1 name=$2
  echo "secret/$name-superuser secret/$name-app configmap/$name-config service/$name-rw service/$name-hl statefulset/$name"
  if [[ -n "$(kubectl -n "$ns" get postgresql "$name" -o jsonpath='{.spec.backup.schedule}')" ]]; then
    echo "cronjob/$name-backup"
  fi
}

uid_of() { kubectl -n "$1" get "$2" -o jsonpath='{.metadata.uid}'; }
exists() { kubectl -n "$1" get "$2" -o name >/dev/null 2>&1; }
absent() { ! kubectl -n "$1" get "$2" -o name >/dev/null 2>&1; }
recreated() { # NS KIND/NAME OLD_UID: exists again with another uid
  local uid
  uid=$(uid_of "$1" "$2" 2>/dev/null) && [[ -n "$uid" && "$uid" != "$3" ]]
}
jsonpath_is() { # NS OBJECT JSONPATH EXPECTED; prints what it found when that differs
  local got
  got=$(kubectl -n "$1" get "$2" -o "jsonpath=$3") || return 1
  [[ "$got" == "$4" ]] || { echo "found: $got"; return 1; }
}

# owned NS KIND/NAME CLUSTER: controlled by the PostgreSQL CLUSTER (its uid) and labelled.
owned() {
  local ns=$1 obj=$2 name=$3 owner_uid got
  owner_uid=$(uid_of "$ns" "postgresql/$name")
  got=$(kubectl -n "$ns" get "$obj" -o jsonpath='{range .metadata.ownerReferences[?(@.controller==true)]}{.kind}/{.name}/{.uid}{end}|{.metadata.labels.tusk\.dev/cluster}')
  [[ "$got" == "PostgreSQL/$name/$owner_uid|$name" ]] || fail "$ns/$obj: controller/label is '$got', want 'PostgreSQL/$name/$owner_uid|$name'"
}

# check_children NS NAME: every child exists, is owned and labelled; the data volume is bound.
check_children() {
  local ns=$1 name=$2 obj
  for obj in $(children "$ns" "$name"); do
    wait_until "$ns/$obj" "$E2E_TIMEOUT" kubectl -n "$ns" get "$obj"
    owned "$ns" "$obj" "$name"
  done
  wait_until "PVC $ns/data-$name-0 Bound" "$E2E_TIMEOUT" jsonpath_is "$ns" "pvc/data-$name-0" '{.status.phase}' Bound
}

ready_status() { kubectl -n "$1" get postgresql "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }

# ---------------------------------------------------------------------------------------------
# Scenarios

scenario_crds() {
  kubectl apply --server-side --force-conflicts -k "$repo/crds" >/dev/null
  kubectl wait --for=condition=Established --timeout=60s crd/postgresqls.tusk.dev crd/backups.tusk.dev >/dev/null
  say "CRDs applied server-side and Established"
  local want got
  # The description of spec.backup in the CRD, whitespace-normalised, must be what explain prints.
  want=$(kubectl get crd postgresqls.tusk.dev \
    -o jsonpath='{.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.backup.description}' | tr -s '[:space:]' ' ')
  want=${want% }
  [[ -n "$want" ]] || fail "the CRD has no description for spec.backup"
  got=$(kubectl explain postgresql.spec.backup | tr -s '[:space:]' ' ')
  [[ "$got" == *"$want"* ]] || fail "kubectl explain postgresql.spec.backup lacks '$want': $got"
  [[ "$got" == *"destination"* && "$got" == *"schedule"* ]] || fail "explain lists no destination/schedule fields"
  say "kubectl explain postgresql.spec.backup: $want"
}

scenario_samples() {
  local ns=e2e-samples file objs obj name
  new_namespace "$ns"
  # What the samples refer to but do not ship.
  kubectl -n "$ns" create secret generic gcs-backup-key --from-literal=key.json='{"type":"service_account"}' >/dev/null
  local pgs=()
  for file in "$repo"/samples/*.yaml; do
    objs=$(kubectl -n "$ns" apply -f "$file" -o name) || fail "samples/$(basename "$file") does not apply"
    say "samples/$(basename "$file"): $(echo "$objs" | tr '\n' ' ')"
    for obj in $objs; do
      [[ "$obj" == postgresql.tusk.dev/* ]] && pgs+=("${obj#*/}")
    done
  done
  ((${#pgs[@]})) || fail "no PostgreSQL in samples/"
  for name in "${pgs[@]}"; do
    if [[ -n "$(kubectl -n "$ns" get postgresql "$name" -o jsonpath='{.spec.restore}')" ]]; then
      say "$name restores from a backup: applied, not waited for"
      continue
    fi
    wait_ready "$ns" "$name"
    check_children "$ns" "$name"
    say "$name Ready; children owned and labelled: $(children "$ns" "$name" | tr '\n' ' ')"
  done
  # Kept for the at-rest scenarios; removed by the runner.
}

scenario_invalid_specs() {
  local ns=e2e-invalid
  new_namespace "$ns"
  local s3='destination: {s3: {bucket: tusk-backups, credentials: {accessKeyId: {name: s, key: a}, secretAccessKey: {name: s, key: b}}}}'
  local gcs='gcs: {bucket: my-bucket, credentials: {serviceAccountKey: {name: k, key: key.json}}}'
  # expected text in the error | metadata.name | spec (flow YAML)
  local cases=(
    "spec.instances|bad|{storage: {size: 1Gi}, instances: 2}"
    "spec.version|bad|{storage: {size: 1Gi}, version: \"13\"}"
    "spec.storage|bad|{version: \"18\"}"
    "spec.storage.size|bad|{storage: {size: \"-1Gi\"}}"
    "spec.storage.size|bad|{storage: {size: lots}}"
    "spec.parameters|bad|{storage: {size: 1Gi}, parameters: {port: \"5433\"}}"
    "spec.parameters|bad|{storage: {size: 1Gi}, parameters: {Max-Connections: \"10\"}}"
    "spec.parameters|bad|{storage: {size: 1Gi}, parameters: {work_mem: \"4MB\\nport = 1\"}}"
    "spec.image|bad|{storage: {size: 1Gi}, image: \"postgres 18\"}"
    "spec.bootstrap.database|bad|{storage: {size: 1Gi}, bootstrap: {database: postgres}}"
    "spec.bootstrap.owner|bad|{storage: {size: 1Gi}, bootstrap: {owner: pg_admin}}"
    "spec.backup.schedule|bad|{storage: {size: 1Gi}, backup: {schedule: \"every night\", $s3}}"
    "spec.backup.destination|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", destination: {}}}"
    "spec.backup.destination|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", destination: {s3: {bucket: abc}, $gcs}}}"
    "spec.backup.retention.keep|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", retention: {keep: 0}, $s3}}"
    "spec.backup.retention.maxAge|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", retention: {maxAge: 30 days}, $s3}}"
    "spec.backup.compression|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", compression: lz4, $s3}}"
    "spec.backup.onDelete|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", onDelete: Purge, $s3}}"
    "spec.backup.destination.s3.bucket|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", destination: {s3: {bucket: Bad_Bucket}}}}"
    "spec.backup.destination.s3.endpoint|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", destination: {s3: {bucket: abc, endpoint: \"minio:9000\"}}}}"
    "spec.backup.destination.s3.path|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", destination: {s3: {bucket: abc, path: ../other}}}}"
    "spec.backup.destination.gcs.bucket|bad|{storage: {size: 1Gi}, backup: {schedule: \"@daily\", destination: {gcs: {bucket: ab, credentials: {serviceAccountKey: {name: k, key: key.json}}}}}}"
    "spec.restore|bad|{storage: {size: 1Gi}, restore: {}}"
    "spec.replicas|bad|{storage: {size: 1Gi}, replicas: 3}"
    "metadata.name|a-name-that-is-far-too-long-for-its-children-0123456789|{storage: {size: 1Gi}}"
    "metadata.name|9lives|{storage: {size: 1Gi}}"
  )
  local c field name spec out n=0
  for c in "${cases[@]}"; do
    IFS='|' read -r field name spec <<<"$c"
    if out=$(printf 'apiVersion: tusk.dev/v1alpha1\nkind: PostgreSQL\nmetadata: {name: %s}\nspec: %s\n' "$name" "$spec" \
      | kubectl -n "$ns" apply -f - 2>&1); then
      fail "accepted: $spec"
    fi
    [[ "$out" == *"$field"* ]] || fail "rejected without naming $field: $spec -> $out"
    n=$((n + 1))
    out=${out#*is invalid: }
    say "rejected, naming $field: ${out:0:150}"
  done
  [[ -z "$(kubectl -n "$ns" get postgresql -o name)" ]] || fail "an invalid PostgreSQL was stored"
  # Changes that are valid at creation but not afterwards.
  cluster "$ns" valid
  wait_ready "$ns" valid
  local generation
  generation=$(kubectl -n "$ns" get postgresql valid -o jsonpath='{.metadata.generation}')
  out=$(kubectl -n "$ns" patch postgresql valid --type=merge -p '{"spec":{"version":"17"}}' 2>&1) && fail "version change accepted"
  [[ "$out" == *"spec.version"* ]] || fail "version change rejected without naming spec.version: $out"
  say "rejected on update: ${out##*: }"
  out=$(kubectl -n "$ns" patch postgresql valid --type=merge \
    -p '{"spec":{"restore":{"backup":{"name":"b"}}}}' 2>&1) && fail "restore added after creation accepted"
  [[ "$out" == *"spec.restore"* ]] || fail "late restore rejected without naming spec.restore: $out"
  say "rejected on update: ${out##*: }"
  jsonpath_is "$ns" postgresql/valid '{.metadata.generation}' "$generation" || fail "a rejected update changed the generation"
  # Nothing was created for any rejected object: the only Tusk children are those of `valid`.
  local stray
  stray=$(kubectl -n "$ns" get secret,configmap,service,statefulset,cronjob -l 'tusk.dev/cluster,tusk.dev/cluster!=valid' -o name)
  [[ -z "$stray" ]] || fail "children of rejected objects exist: $stray"
  say "$((n + 2)) invalid specs rejected by the API server; nothing created for them"
  drop_namespace "$ns"
}

scenario_self_healing() {
  local ns=e2e-heal name=heal obj old
  new_namespace "$ns"
  cluster "$ns" "$name" s3
  wait_ready "$ns" "$name"
  check_children "$ns" "$name"
  for obj in $(children "$ns" "$name"); do
    old=$(uid_of "$ns" "$obj")
    kubectl -n "$ns" delete "$obj" --wait=true >/dev/null
    wait_until "$ns/$obj to be re-created" "$E2E_TIMEOUT" recreated "$ns" "$obj" "$old"
    owned "$ns" "$obj" "$name"
    say "deleted $obj: re-created"
  done
  wait_ready "$ns" "$name"

  # Drift: hand edits of fields the operator owns are reverted.
  local container image
  container=$(kubectl -n "$ns" get "statefulset/$name" -o jsonpath='{.spec.template.spec.containers[0].name}')
  image=$(kubectl -n "$ns" get "statefulset/$name" -o jsonpath='{.spec.template.spec.containers[0].image}')
  kubectl -n "$ns" patch "statefulset/$name" --type=strategic \
    -p "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"$container\",\"image\":\"example.com/drift:1\"}]}}}}" >/dev/null
  wait_until "the StatefulSet image to be reverted to $image" "$E2E_TIMEOUT" \
    jsonpath_is "$ns" "statefulset/$name" '{.spec.template.spec.containers[0].image}' "$image"
  say "StatefulSet image changed by hand: reverted to $image"
  local selector
  selector=$(kubectl -n "$ns" get "service/$name-rw" -o jsonpath='{.spec.selector}')
  kubectl -n "$ns" patch "service/$name-rw" --type=merge -p '{"spec":{"selector":{"tusk.dev/cluster":"someone-else"}}}' >/dev/null
  wait_until "the selector of service/$name-rw to be reverted to $selector" "$E2E_TIMEOUT" \
    jsonpath_is "$ns" "service/$name-rw" '{.spec.selector}' "$selector"
  say "Service selector changed by hand: reverted to $selector"
  wait_ready "$ns" "$name"
  drop_namespace "$ns"
}

scenario_backup_cronjob() {
  local ns=e2e-backup name=nightly rc=0
  new_namespace "$ns"
  # Hold the cluster before Ready: no node accepts its pod.
  local nodes
  nodes=$(kubectl get nodes -o name)
  # shellcheck disable=SC2086
  kubectl cordon $nodes >/dev/null
  # shellcheck disable=SC2086,SC2064
  trap "kubectl uncordon $nodes >/dev/null 2>&1 || true" EXIT
  cluster "$ns" "$name" s3
  wait_until "BackupScheduled=False/WaitingForReady on $name" "$E2E_TIMEOUT" jsonpath_is "$ns" "postgresql/$name" \
    '{.status.conditions[?(@.type=="BackupScheduled")].reason}' WaitingForReady
  [[ "$(ready_status "$ns" "$name")" == False ]] || fail "$name is Ready without a scheduled pod"
  absent "$ns" "cronjob/$name-backup" || fail "the backup CronJob exists before the cluster was Ready"
  say "not Ready yet (pod unschedulable): no backup CronJob"
  # shellcheck disable=SC2086
  kubectl uncordon $nodes >/dev/null
  trap - EXIT
  wait_ready "$ns" "$name"
  wait_until "cronjob $name-backup" "$E2E_TIMEOUT" exists "$ns" "cronjob/$name-backup"
  wait_until "cronjob $name-backup active (suspend=false)" "$E2E_TIMEOUT" \
    jsonpath_is "$ns" "cronjob/$name-backup" '{.spec.suspend}' false
  say "Ready: the backup CronJob exists and is active"

  pod_set_ready "$ns" "$name-0" false || rc=$?
  ((rc == 2)) && skip "this platform cannot make a pod unready (hook pod_set_ready)"
  ((rc == 0)) || fail "pod_set_ready failed"
  wait_until "$name to turn Ready=False" "$E2E_TIMEOUT" jsonpath_is "$ns" "postgresql/$name" \
    '{.status.conditions[?(@.type=="Ready")].status}' False
  wait_until "cronjob $name-backup suspended" "$E2E_TIMEOUT" jsonpath_is "$ns" "cronjob/$name-backup" '{.spec.suspend}' true
  say "pod unready: cluster not Ready, CronJob suspended"
  pod_set_ready "$ns" "$name-0" true
  wait_ready "$ns" "$name"
  wait_until "cronjob $name-backup resumed" "$E2E_TIMEOUT" jsonpath_is "$ns" "cronjob/$name-backup" '{.spec.suspend}' false
  say "pod ready again: cluster Ready, CronJob active"
  kubectl -n "$ns" patch postgresql "$name" --type=json -p '[{"op":"remove","path":"/spec/backup"}]' >/dev/null
  wait_until "cronjob $name-backup to be deleted once spec.backup is gone" "$E2E_TIMEOUT" absent "$ns" "cronjob/$name-backup"
  wait_until "BackupScheduled=False/NotConfigured on $name" "$E2E_TIMEOUT" jsonpath_is "$ns" "postgresql/$name" \
    '{.status.conditions[?(@.type=="BackupScheduled")].reason}' NotConfigured
  wait_ready "$ns" "$name"
  say "spec.backup removed: CronJob deleted, BackupScheduled NotConfigured"
  drop_namespace "$ns"
}

scenario_deletion_gc() {
  local ns=e2e-gc name=gone
  new_namespace "$ns"
  cluster "$ns" "$name" s3
  wait_ready "$ns" "$name"
  check_children "$ns" "$name"
  kubectl -n "$ns" delete postgresql "$name" --wait=true --timeout="${E2E_TIMEOUT}s" >/dev/null
  leftovers() {
    local left
    left=$(kubectl -n "$ns" get secret,configmap,service,statefulset,cronjob,job,pod,pvc -l "tusk.dev/cluster=$name" -o name)
    left+=$(kubectl -n "$ns" get pvc -o name)
    echo "$left"
    [[ -z "$left" ]]
  }
  wait_until "every child of $name (and its volume claim) to be garbage-collected" "$E2E_TIMEOUT" leftovers
  say "PostgreSQL deleted: Secrets, ConfigMap, Services, StatefulSet, pod, PVC and CronJob collected"
  drop_namespace "$ns"
}

scenario_two_namespaces() {
  local a=e2e-twin-a b=e2e-twin-b name=twin obj
  new_namespace "$a"
  new_namespace "$b"
  cluster "$a" "$name" s3
  cluster "$b" "$name" s3
  wait_ready "$a" "$name"
  wait_ready "$b" "$name"
  check_children "$a" "$name"
  check_children "$b" "$name"
  [[ "$(kubectl -n "$a" get secret "$name-app" -o jsonpath='{.data.password}')" != \
    "$(kubectl -n "$b" get secret "$name-app" -o jsonpath='{.data.password}')" ]] || fail "both clusters got the same password"
  # A change in one namespace touches only that namespace.
  local before_a
  before_a=$(kubectl -n "$a" get "configmap/$name-config" -o jsonpath='{.metadata.resourceVersion}')
  kubectl -n "$b" patch postgresql "$name" --type=merge -p '{"spec":{"parameters":{"work_mem":"8MB"}}}' >/dev/null
  has_work_mem() { [[ "$(kubectl -n "$b" get "configmap/$name-config" -o jsonpath='{.data}')" == *work_mem* ]]; }
  wait_until "the ConfigMap in $b to carry work_mem" "$E2E_TIMEOUT" has_work_mem
  wait_ready "$b" "$name"
  jsonpath_is "$a" "configmap/$name-config" '{.metadata.resourceVersion}' "$before_a" || fail "a change in $b rewrote $a's ConfigMap"
  say "a change to $b/$name left $a/$name untouched"
  # Deleting one leaves the other whole.
  local uids_b=()
  for obj in $(children "$b" "$name"); do uids_b+=("$obj=$(uid_of "$b" "$obj")"); done
  kubectl -n "$a" delete postgresql "$name" --wait=true >/dev/null
  collected() { [[ -z "$(kubectl -n "$a" get secret,configmap,service,statefulset,cronjob -l "tusk.dev/cluster=$name" -o name)" ]]; }
  wait_until "the children in $a to be collected" "$E2E_TIMEOUT" collected
  local entry
  for entry in "${uids_b[@]}"; do
    [[ "$(uid_of "$b" "${entry%%=*}")" == "${entry#*=}" ]] || fail "$b/${entry%%=*} changed when $a/$name was deleted"
  done
  [[ "$(ready_status "$b" "$name")" == True ]] || fail "$b/$name is not Ready after $a/$name was deleted"
  say "deleting $a/$name left every child of $b/$name in place, and it Ready"
  drop_namespace "$a" "$b"
}

scenario_operator_restart() {
  local ns=e2e-restart names=(r1 r2 r3 r4 r5 r6 r7 r8) name
  new_namespace "$ns"
  # Eight clusters in one apply, so that the operator is still busy when it is killed: as soon
  # as a watch shows its first child.
  local tmp first watcher applier fd
  tmp=$(mktemp -d)
  mkfifo "$tmp/children"
  timeout "$E2E_TIMEOUT" kubectl -n "$ns" get secret -l tusk.dev/cluster --watch -o name >"$tmp/children" 2>/dev/null &
  watcher=$!
  exec {fd}<"$tmp/children"
  (for name in "${names[@]}"; do cluster_yaml "$ns" "$name" s3; echo "---"; done | kubectl apply -f - >/dev/null) &
  applier=$!
  read -r -t "$E2E_TIMEOUT" -u "$fd" first || true
  [[ -z "$first" ]] || operator_kill >/dev/null
  wait "$applier"
  kill "$watcher" 2>/dev/null || true
  exec {fd}<&-
  rm -rf "$tmp"
  [[ -n "$first" ]] || fail "the operator wrote no child within ${E2E_TIMEOUT}s"
  local seen full
  seen=$(kubectl -n "$ns" get secret,configmap,service,statefulset,cronjob -l tusk.dev/cluster -o name | wc -l)
  full=$(( ${#names[@]} * 7 ))
  say "SIGKILLed the operator with $seen of the $full children written"
  ((seen < full)) || say "(it had finished before the kill landed: this run proves a restart, not an interruption)"
  # Secrets written before the crash must survive it unchanged.
  local secrets=() s
  for s in $(kubectl -n "$ns" get secret -l tusk.dev/cluster -o name); do secrets+=("$s=$(uid_of "$ns" "$s")"); done
  operator_start >/dev/null
  local restarted=$SECONDS
  say "operator restarted"
  wait_ready "$ns" "${names[@]}"
  say "all ${#names[@]} clusters Ready $((SECONDS - restarted))s after the restart"
  local kind want got
  for name in "${names[@]}"; do
    check_children "$ns" "$name"
    for kind in secret:2 configmap:1 service:2 statefulset:1 cronjob:1 pod:1 pvc:1; do
      want=${kind#*:}
      got=$(kubectl -n "$ns" get "${kind%%:*}" -l "tusk.dev/cluster=$name" -o name | wc -l)
      ((got == want)) || fail "$name has $got ${kind%%:*}(s), want $want"
    done
  done
  for s in "${secrets[@]}"; do
    [[ "$(uid_of "$ns" "${s%%=*}")" == "${s#*=}" ]] || fail "${s%%=*} was re-created after the restart"
  done
  say "all ${#names[@]} clusters Ready with exactly one of each child; Secrets kept"
  drop_namespace "$ns"
}

# metric NAME_WITH_LABELS: the sum of the samples whose name (and labels) start with the argument.
metric() {
  operator_metrics | awk -v m="$1" 'index($0, m) == 1 { s += $NF } END { print s + 0 }'
}

scenario_metrics() {
  local ns=e2e-metrics before after sts_before
  new_namespace "$ns"
  before=$(metric 'tusk_reconcile_total')
  sts_before=$(metric 'tusk_child_writes_total{kind="StatefulSet",change="created"}')
  cluster "$ns" counted
  wait_ready "$ns" counted
  grown() { (($(metric 'tusk_reconcile_total') > before)); }
  wait_until "tusk_reconcile_total to grow past $before" "$E2E_TIMEOUT" grown
  after=$(metric 'tusk_reconcile_total')
  say "tusk_reconcile_total: $before -> $after after one new cluster"
  (($(metric 'tusk_reconcile_duration_seconds_count') > 0)) || fail "no tusk_reconcile_duration_seconds samples"
  (($(metric 'tusk_child_writes_total{kind="StatefulSet",change="created"}') == sts_before + 1)) \
    || fail "tusk_child_writes_total{kind=\"StatefulSet\",change=\"created\"} did not count the new StatefulSet once"
  # Only a lower bound: other scenarios' clusters may be Ready at the same time.
  local ready_metric
  ready_positive() { (($(metric 'tusk_clusters{phase="Ready"}') >= 1)); }
  wait_until 'tusk_clusters{phase="Ready"} to count a Ready cluster' "$E2E_TIMEOUT" ready_positive
  ready_metric=$(metric 'tusk_clusters{phase="Ready"}')
  say "tusk_clusters{phase=\"Ready\"} = $ready_metric; reconcile durations and child writes exposed"
  drop_namespace "$ns"
}

scenario_zero_writes_at_rest() {
  local mark rc=0 writes
  mark=$(operator_writes_mark) || rc=$?
  ((rc == 2)) && skip "this platform has no audit trail of the operator's requests (hook operator_writes_mark)"
  ((rc == 0)) || fail "operator_writes_mark failed"
  # Converged: every namespace of an earlier scenario gone, every cluster Ready at its generation.
  no_terminating() {
    [[ -z "$(kubectl get namespace -l e2e.tusk.dev/scenario -o jsonpath='{range .items[?(@.status.phase=="Terminating")]}{.metadata.name} {end}')" ]]
  }
  wait_until "earlier scenarios' namespaces to be gone" "$E2E_TIMEOUT" no_terminating
  # With L4 the samples' Backup runs and the restore cluster restores: both must have finished.
  local l4=${TUSK_E2E_L4:-0}
  converged() {
    # Without L4 a cluster restoring from a backup (spec.restore) never restores: only observed.
    kubectl get postgresql -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.generation} {.status.observedGeneration} {.status.phase} {.spec.restore}{"\n"}{end}' \
      | awk -v l4="$l4" '$2 != $3 || ($4 != "Ready" && ($5 == "" || l4 == 1)) { print; bad = 1 } END { exit bad }'
  }
  wait_until "every PostgreSQL to be Ready at its current generation" "$E2E_TIMEOUT" converged
  backups_settled() {
    # Final with L4; without it a backup Job never finishes, so Running is as far as it gets.
    kubectl get backup -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.phase}{"\n"}{end}' \
      | awk -v l4="$l4" '!($2 == "Completed" || $2 == "Failed" || (l4 != 1 && $2 == "Running")) { print; bad = 1 } END { exit bad }'
  }
  wait_until "every Backup to be settled" "$E2E_TIMEOUT" backups_settled
  recorded() {
    # A completed backup is reflected in its cluster's status (lastSuccessfulBackup).
    local ns name cluster
    while read -r ns name cluster; do
      [[ -n "$ns" ]] || continue
      exists "$ns" "postgresql/$cluster" || continue
      [[ -n "$(kubectl -n "$ns" get postgresql "$cluster" -o jsonpath='{.status.lastSuccessfulBackup.name}')" ]] \
        || { echo "$ns/$cluster does not show Backup $name yet"; return 1; }
    done < <(kubectl get backup -A -o jsonpath='{range .items[?(@.status.phase=="Completed")]}{.metadata.namespace} {.metadata.name} {.spec.cluster.name}{"\n"}{end}')
  }
  wait_until "clusters to show their completed Backups" "$E2E_TIMEOUT" recorded
  local count
  count=$(kubectl get postgresql -A -o name | wc -l)
  ((count > 0)) || fail "no PostgreSQL to be at rest"
  mark=$(operator_writes_mark)
  say "measuring the operator's write requests for ${E2E_REST_WINDOW}s with $count converged clusters"
  sleep "$E2E_REST_WINDOW" # a measurement window, not a synchronisation
  writes=$(operator_writes_since "$mark")
  [[ -z "$writes" ]] || fail "$(echo "$writes" | wc -l) write(s) at rest: $writes"
  say "0 create/update/patch/delete requests by $OPERATOR_SA in ${E2E_REST_WINDOW}s (Lease renewals excluded)"
}

# Regressions of operator bugs this suite found (fixed in src/).
scenario_selector_extra_key() {
  # Service.spec.selector is an atomic map: a key added by hand must be reverted like a changed
  # value, or the Service selects no pod while the operator reports the cluster converged.
  local ns=e2e-selector name=sel selector
  new_namespace "$ns"
  cluster "$ns" "$name"
  wait_ready "$ns" "$name"
  selector=$(kubectl -n "$ns" get "service/$name-rw" -o jsonpath='{.spec.selector}')
  kubectl -n "$ns" patch "service/$name-rw" --type=merge -p '{"spec":{"selector":{"extra":"yes"}}}' >/dev/null
  wait_until "the selector of service/$name-rw to be reverted to $selector" 30 \
    jsonpath_is "$ns" "service/$name-rw" '{.spec.selector}' "$selector"
  say "a key added to the Service selector by hand: reverted"
  drop_namespace "$ns"
}

scenario_restart_backlog() {
  # Clusters created while the operator is down must all be reconciled promptly after it starts,
  # not one at once and the rest after the 30 s cache-sync timeout.
  local ns=e2e-backlog names=(b1 b2 b3 b4 b5) name restarted
  new_namespace "$ns"
  operator_kill >/dev/null
  for name in "${names[@]}"; do cluster_yaml "$ns" "$name"; echo "---"; done | kubectl apply -f - >/dev/null
  operator_start >/dev/null
  restarted=$SECONDS
  E2E_TIMEOUT=15 wait_ready "$ns" "${names[@]}"
  say "${#names[@]} clusters created while the operator was down: Ready $((SECONDS - restarted))s after it started"
  drop_namespace "$ns"
}

scenario_clusters_gauge_after_delete() {
  # A deleted cluster triggers no reconcile; the gauge must follow it anyway (recounted at scrape).
  local ns=e2e-gauge
  new_namespace "$ns"
  cluster "$ns" gauge
  wait_ready "$ns" gauge
  local before
  before=$(metric 'tusk_clusters{phase="Ready"}')
  kubectl -n "$ns" delete postgresql gauge --wait=true >/dev/null
  dropped() { (($(metric 'tusk_clusters{phase="Ready"}') == before - 1)); }
  wait_until "tusk_clusters{phase=\"Ready\"} to drop from $before to $((before - 1))" 30 dropped
  say "tusk_clusters follows a deletion"
  drop_namespace "$ns"
}

# zero_writes_at_rest runs while nothing else is in flight: right after the samples converge.
ALL_SCENARIOS=(crds samples zero_writes_at_rest invalid_specs self_healing selector_extra_key
  backup_cronjob deletion_gc two_namespaces operator_restart restart_backlog metrics
  clusters_gauge_after_delete)
# L4: real bytes through the operator's Jobs, where Tusk's pods really run (e2e/scenarios-l4.sh).
if [[ "${TUSK_E2E_L4:-0}" == 1 ]]; then
  # shellcheck source=e2e/scenarios-l4.sh
  source "$repo/e2e/scenarios-l4.sh"
  # The backup lifecycle driven by the operator: Backups, retention, restore, deletion.
  # shellcheck source=e2e/scenarios-backups.sh
  source "$repo/e2e/scenarios-backups.sh"
fi

# ---------------------------------------------------------------------------------------------
# Runner

dump_diagnostics() {
  local out="$1"
  {
    echo "===== operator log (last 200 lines)"
    operator_logs 2>&1 | tail -n 200 | sed 's/\x1b\[[0-9;]*m//g'
    echo "===== Events"
    kubectl get events -A --sort-by=.lastTimestamp 2>&1 | tail -n 100
    echo "===== PostgreSQL objects"
    kubectl get postgresql -A -o yaml 2>&1
    echo "===== Tusk-owned objects (label tusk.dev/cluster)"
    kubectl get secret,configmap,service,statefulset,cronjob,job,pod,pvc -A -l tusk.dev/cluster -o yaml 2>&1 \
      | sed '/^ *password: /d; /^ *uri: /d; /^ *pgpass: /d'
  } >"$out"
}

main() {
  local selected=("$@") name rc started results=() failed=0
  ((${#selected[@]})) || selected=("${ALL_SCENARIOS[@]}")
  local artifacts="${E2E_ARTIFACTS:-}"
  for name in "${selected[@]}"; do
    name=${name//-/_}
    declare -F "scenario_$name" >/dev/null || {
      echo "unknown scenario: $name (known: ${ALL_SCENARIOS[*]})" >&2
      exit 2
    }
    echo "=== $name"
    started=$SECONDS
    rc=0
    (set -e; "scenario_$name") || rc=$?
    local took=$((SECONDS - started))
    case $rc in
      0) results+=("PASS  ${took}s  $name") ;;
      3) results+=("SKIP  ${took}s  $name") ;;
      *)
        results+=("FAIL  ${took}s  $name")
        failed=$((failed + 1))
        [[ -n "$artifacts" ]] || artifacts=$(mktemp -d -t tusk-e2e-artifacts.XXXXXX)
        mkdir -p "$artifacts"
        dump_diagnostics "$artifacts/$name.txt"
        echo "--- diagnostics of $name ($artifacts/$name.txt):"
        cat "$artifacts/$name.txt"
        ;;
    esac
    echo "${results[-1]}"
  done
  echo
  echo "=== summary"
  printf '%s\n' "${results[@]}"
  if ((failed)); then
    echo "$failed scenario(s) failed; diagnostics in $artifacts" >&2
    return 1
  fi
}

main "$@"
