#!/usr/bin/env bash
# Checks on REAL pods (e2e/local/node.sh): the operator runs as deploy/'s Deployment from its
# image, PostgreSQL from the test stand-in image, backups through the real agent image into an
# in-cluster MinIO. Prints PASS/FAIL per check and "N passed, N failed" last; exits non-zero on
# any failure.
#   source $TUSK_E2E_DIR/env; e2e/local/node-check.sh [CHECK...]
# Checks: operator samples broken_config backup_restore kill_postgres delete_pod
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
PG_IMAGE=${TUSK_E2E_PG_IMAGE:-localhost/tusk-test/postgres:15}
PG_VERSION=${TUSK_E2E_PG_VERSION:-15}
TIMEOUT=${TUSK_E2E_NODE_TIMEOUT:-300}
NS=tusk-node-e2e
log() { echo "node-check: $*" >&2; }
# shellcheck source=e2e/local/lib.sh
source "$here/lib.sh"

passed=0 failed=0 failures=()
check() { # NAME FUNCTION
  local name=$1 t=$SECONDS; shift
  echo "--- $name"
  if "$@"; then
    echo "PASS $name ($((SECONDS - t))s)"; passed=$((passed + 1))
  else
    echo "FAIL $name ($((SECONDS - t))s)"; failed=$((failed + 1)); failures+=("$name")
  fi
}
fail() { echo "  $*"; return 1; }
k() { kubectl -n "$NS" "$@"; }

# sample FILE: a sample with the test image and its major (the samples name the official image
# of PostgreSQL 18, which this machine cannot pull).
sample() {
  python3 - "$1" "$PG_IMAGE" "$PG_VERSION" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
out = []
for doc in re.split(r"(?m)^---\s*$", text):
    if re.search(r"(?m)^kind: PostgreSQL\s*$", doc):
        doc = re.sub(r'(?m)^  version: "[0-9]+"', f'  version: "{sys.argv[3]}"\n  image: {sys.argv[2]}', doc)
    out.append(doc)
print("---".join(out))
PY
}

# psql_in CLUSTER SQL: as the superuser over the pod's socket (peer authentication).
psql_in() { k exec "$1-0" -c postgres -- psql -U postgres -X -At -v ON_ERROR_STOP=1 -d "${3:-postgres}" -c "$2"; }
ready() { k wait --for=condition=Ready "postgresql/$1" --timeout="${2:-$TIMEOUT}s" >/dev/null; }
pod_ready() { [[ "$(k get pod "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]; }
restarts() { k get pod "$1" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
why() {
  echo "  postgresql: $(k get postgresql "$1" -o jsonpath='{.status.conditions}' 2>&1)"
  echo "  pod: $(k get pod "$1-0" -o jsonpath='{.status.containerStatuses}' 2>&1)"
  k logs "$1-0" -c postgres --tail=20 2>&1 | sed 's/^/  log: /'
}

check_operator() {
  kubectl -n tusk-system rollout status deployment/tusk-operator --timeout="${TIMEOUT}s" >/dev/null \
    || { kubectl -n tusk-system logs deployment/tusk-operator --tail=30 | sed 's/^/  log: /'; fail "the operator Deployment did not roll out"; }
  local image; image=$(kubectl -n tusk-system get pod -l app.kubernetes.io/name=tusk-operator -o jsonpath='{.items[0].spec.containers[0].image}')
  echo "  operator pod Ready from $image"
}

check_samples() {
  kubectl create namespace "$NS" >/dev/null 2>&1 || true
  sample "$repo/samples/postgresql.yaml" | k apply -f - >/dev/null || return 1
  ready demo || { why demo; fail "samples/postgresql.yaml (demo) did not become Ready"; }
  # Real probes: the kubelet ran pg_isready in the container; the application role can log in
  # over the network through the -rw Service (SCRAM, pg_hba.conf from the ConfigMap).
  local pw db owner; pw=$(k get secret demo-app -o jsonpath='{.data.password}' | base64 -d)
  owner=$(k get secret demo-app -o jsonpath='{.data.username}' | base64 -d)
  db=$(k get postgresql demo -o jsonpath='{.spec.bootstrap.database}'); db=${db:-app}
  local out; out=$(k exec demo-0 -c postgres -- env PGPASSWORD="$pw" psql -X -At -h demo-rw -U "$owner" -d "$db" \
    -c 'select current_user, version()') || { why demo; fail "the app role cannot connect through demo-rw"; }
  echo "  demo Ready; via demo-rw: $out"
}

check_broken_config() {
  kubectl create namespace "$NS" >/dev/null 2>&1 || true
  k apply -f - >/dev/null <<YAML || return 1
apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {name: broken}
spec:
  version: "$PG_VERSION"
  image: $PG_IMAGE
  storage: {size: 1Gi}
  parameters: {shared_buffers: "not-a-size"}
YAML
  # It must not turn Ready: give it as long as the good one needed, plus startup margin.
  local deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    if pod_ready broken-0; then fail "broken-0 became Ready with an invalid postgresql.conf"; return 1; fi
    sleep 2
  done
  [[ "$(k get postgresql broken -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" != True ]] \
    || fail "postgresql/broken reports Ready"
  echo "  broken-0 not Ready after 60s; restarts $(restarts broken-0); log: $(k logs broken-0 -c postgres --tail=50 2>&1 | grep -m1 -i 'shared_buffers\|invalid')"
  k delete postgresql broken --wait=false >/dev/null
}

checksums() { # CLUSTER: one line per table of the shop database: name and md5 of its sorted rows
  local t
  for t in $(psql_in "$1" "select tablename from pg_tables where schemaname = 'public' order by 1" shop); do
    echo "$t $(psql_in "$1" "select md5(coalesce(string_agg(r::text, ',' order by r::text), '')) from public.$t r" shop)"
  done
}

check_backup_restore() {
  kubectl create namespace "$NS" >/dev/null 2>&1 || true
  sed -e 's#docker.io/minio/minio:[^[:space:]]*#localhost/tusk-test/minio:e2e#' \
      -e 's#docker.io/curlimages/curl:[^[:space:]]*#localhost/tusk-test/minio:e2e#' \
      -e 's#imagePullPolicy: IfNotPresent#imagePullPolicy: Never#' \
      "$repo/e2e/kind/minio.yaml" | kubectl apply -f - >/dev/null || return 1
  kubectl -n minio wait --for=condition=Complete job/make-bucket --timeout="${TIMEOUT}s" >/dev/null \
    || { kubectl -n minio logs job/make-bucket --tail=10 2>&1 | sed 's/^/  log: /'; fail "MinIO bucket Job did not complete"; }
  echo "  MinIO up in-cluster, bucket made by its Job"
  sample "$repo/samples/postgresql-s3-minio.yaml" | k apply -f - >/dev/null || return 1
  ready shop || { why shop; fail "shop did not become Ready"; }
  psql_in shop "create table orders (id int primary key, item text, qty int);
    insert into orders select g, 'item ' || g, g % 7 from generate_series(1, 5000) g;
    create table customers (id int primary key, name text);
    insert into customers select g, md5(g::text) from generate_series(1, 800) g;
    alter table orders owner to shop; alter table customers owner to shop;" shop >/dev/null \
    || fail "seeding shop failed"
  local before; before=$(checksums shop)
  echo "  seeded: $(echo "$before" | tr '\n' ';')"
  k apply -f "$repo/samples/backup.yaml" >/dev/null || return 1
  k wait backup/shop-manual --for=condition=Completed --timeout="${TIMEOUT}s" >/dev/null \
    || { echo "  backup: $(k get backup shop-manual -o jsonpath='{.status}')"; k logs -l job-name --tail=20 --all-containers 2>&1 | sed 's/^/  log: /'; fail "Backup shop-manual not Completed"; }
  echo "  Backup shop-manual Completed: $(k get backup shop-manual -o jsonpath='{.status.phase}')"
  sample "$repo/samples/postgresql-restore.yaml" | k apply -f - >/dev/null || return 1
  ready shop-restored || { why shop-restored; fail "shop-restored did not become Ready"; }
  local after; after=$(checksums shop-restored)
  [[ -n "$before" && "$before" == "$after" ]] || { echo "  restored: $(echo "$after" | tr '\n' ';')"; fail "per-table checksums differ"; }
  echo "  restored into shop-restored: per-table checksums equal"
}

check_kill_postgres() {
  ready demo 10 || { check_samples >/dev/null || return 1; }
  psql_in demo "create table if not exists heal (v int); insert into heal values (42)" >/dev/null || return 1
  local r0; r0=$(restarts demo-0)
  # PostgreSQL is the container's PID 1 (the entrypoint execs it): an immediate shutdown ends
  # the container like a crash would.
  k exec demo-0 -c postgres -- pg_ctl stop --mode=immediate --pgdata=/var/lib/postgresql/data >/dev/null 2>&1 || true
  wait_for "demo-0 to restart" "$TIMEOUT" bash -c "[[ \$(kubectl -n $NS get pod demo-0 -o jsonpath='{.status.containerStatuses[0].restartCount}') -gt $r0 ]]" \
    || fail "demo-0 did not restart"
  ready demo || { why demo; fail "demo not Ready again after the kill"; }
  wait_for "demo-0 Ready" "$TIMEOUT" pod_ready demo-0 || fail "demo-0 not Ready"
  [[ "$(psql_in demo 'select sum(v) from heal')" == 42 ]] || fail "data lost after the restart"
  echo "  restartCount $r0 -> $(restarts demo-0); Ready again, data intact"
}

check_delete_pod() {
  ready demo 10 || { check_samples >/dev/null || return 1; }
  psql_in demo "create table if not exists heal (v int); insert into heal values (1)" >/dev/null || return 1
  local want; want=$(psql_in demo 'select sum(v) from heal')
  local uid; uid=$(k get pod demo-0 -o jsonpath='{.metadata.uid}')
  k delete pod demo-0 --wait=true --timeout="${TIMEOUT}s" >/dev/null || return 1
  wait_for "a new demo-0" "$TIMEOUT" bash -c "u=\$(kubectl -n $NS get pod demo-0 -o jsonpath='{.metadata.uid}') && [[ -n \$u && \$u != $uid ]]" \
    || fail "no new demo-0"
  wait_for "demo-0 Ready" "$TIMEOUT" pod_ready demo-0 || { why demo; fail "the new demo-0 is not Ready"; }
  ready demo || fail "demo not Ready"
  [[ "$(psql_in demo 'select sum(v) from heal')" == "$want" ]] || fail "data lost with the pod"
  # The preStop hook (pg_ctl stop) must not be reported failed on a plain deletion.
  local hooks; hooks=$(k get events --field-selector reason=FailedPreStopHook,involvedObject.name=demo-0 -o name | wc -l)
  ((hooks == 0)) || fail "FailedPreStopHook on demo-0: $(k get events --field-selector reason=FailedPreStopHook -o jsonpath='{.items[0].message}')"
  echo "  new pod Ready on the same volume, data intact, no FailedPreStopHook"
}

all=(operator samples broken_config backup_restore kill_postgres delete_pod)
(($#)) || set -- "${all[@]}"
for c in "$@"; do check "$c" "check_$c"; done
echo
((failed == 0)) || echo "failed: ${failures[*]}"
echo "node-check: $passed passed, $failed failed"
((failed == 0))
