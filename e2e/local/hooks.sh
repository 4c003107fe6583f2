# shellcheck shell=bash
# Platform hooks of e2e/scenarios.sh for the local control plane (E2E_HOOKS=e2e/local/hooks.sh):
# the operator is a process managed by e2e/local/operator.sh, pods are kwok's, and the
# apiserver's audit log records the operator's requests.
_local=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_audit="${TUSK_E2E_DIR:-/tmp/tusk-e2e}/logs/audit.log"

operator_kill() { "$_local/operator.sh" kill; }
operator_start() { "$_local/operator.sh" start; }
operator_logs() { "$_local/operator.sh" logs; }
operator_metrics() { "$_local/operator.sh" metrics; }

# kwok Stages (e2e/local/stages.yaml) turn a pod annotated e2e.tusk.dev/ready=false unready, and
# Ready again without the annotation.
pod_set_ready() {
  local ns=$1 pod=$2 ready=$3
  if [[ "$ready" == false ]]; then
    kubectl -n "$ns" annotate --overwrite pod "$pod" e2e.tusk.dev/ready=false >/dev/null
  else
    kubectl -n "$ns" annotate pod "$pod" e2e.tusk.dev/ready- >/dev/null
  fi
}

# A mark is a byte offset in the audit log (one JSON event per line).
operator_writes_mark() { stat -c %s "$_audit"; }
operator_writes_since() {
  tail -c +"$(($1 + 1))" "$_audit" | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("user", {}).get("username") != "system:serviceaccount:tusk-system:tusk-operator":
        continue
    if e.get("verb") not in ("create", "update", "patch", "delete", "deletecollection"):
        continue
    ref = e.get("objectRef", {})
    if ref.get("resource") == "leases":  # leader-election renewals are not reconcile writes
        continue
    print(e.get("verb"), e.get("requestURI"), e.get("responseStatus", {}).get("code"))
'
}

# L4 (e2e/scenarios-l4.sh with e2e/local/l4.sh): SQL goes to the local PostgreSQL the job runner
# keeps for the cluster, as its superuser; the store is the local MinIO.
db_sql() { "$_local/pg.sh" "$1" "$2" -A -t -q -d "$3" -c "$4"; }
store_ls() { "$_local/storage.sh" ls "$1"; }
app_sql() { TUSK_PG_SECRET=app "$_local/pg.sh" "$1" "$2" -A -t -q -c "$3"; }
