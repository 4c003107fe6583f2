# shellcheck shell=bash
# L4 scenarios: real bytes through the Jobs the operator generates. Sourced by e2e/scenarios.sh
# when TUSK_E2E_L4=1; they need a platform where Tusk's pods really run:
#   - the local control plane plus e2e/local/l4.sh (a real PostgreSQL per database pod, MinIO,
#     and the job runner executing Job pods with the real backup-agent), or
#   - kind with e2e/kind/up.sh (real pods, MinIO in namespace minio).
#
# Platform hooks (override in E2E_HOOKS; e2e/local/hooks.sh does for the local platform):
#   db_sql NS CLUSTER DB SQL   run SQL as the superuser in DB of cluster CLUSTER; print the rows
#                              unaligned (`|`-separated), tuples only
#   store_ls PREFIX            print the keys under PREFIX in bucket tusk-backups; return 2 when
#                              the platform cannot look into the store
#   app_sql NS CLUSTER SQL     the same as the application owner, with the `<cluster>-app` Secret
# `repo`, `say`, `fail`, `skip`, `wait_until`, `cluster`, ... come from e2e/scenarios.sh.
# shellcheck disable=SC2154
# Predicates handed to wait_until are only invoked through it:
# shellcheck disable=SC2329

if ! declare -F db_sql >/dev/null; then
  # Real pods: psql inside the database pod, as the users of the tutorials do.
  db_sql() {
    kubectl -n "$1" exec "$2-0" -c postgres -- \
      psql -X -v ON_ERROR_STOP=1 -A -t -q -U postgres -d "$3" -c "$4"
  }
fi
if ! declare -F store_ls >/dev/null; then
  store_ls() { return 2; }
fi
if ! declare -F app_sql >/dev/null; then
  # The application's own connection URI (over the cluster's Service), from inside the pod.
  app_sql() {
    local uri
    uri=$(kubectl -n "$1" get secret "$2-app" -o jsonpath='{.data.uri}' | base64 -d)
    kubectl -n "$1" exec "$2-0" -c postgres -- psql "$uri" -X -v ON_ERROR_STOP=1 -A -t -q -c "$3"
  }
fi

# l4_seed NS CLUSTER DB OWNER: tables owned by the application role, with awkward values.
l4_seed() {
  db_sql "$1" "$2" "$3" "SET ROLE \"$4\";
    CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, note text);
    INSERT INTO customers SELECT g, 'customer ' || g, CASE WHEN g % 3 = 0 THEN NULL ELSE E'quote '' tab \t ü €' END
      FROM generate_series(1, 2000) g;
    CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint REFERENCES customers,
      amount numeric(12, 2), placed_at timestamptz, tags jsonb);
    INSERT INTO orders (customer_id, amount, placed_at, tags)
      SELECT 1 + g % 2000, (g * 7 % 10000) / 100.0, timestamptz '2026-01-01 00:00+00' + g * interval '1 minute',
             jsonb_build_object('n', g, 'even', g % 2 = 0)
      FROM generate_series(1, 20000) g;
    CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 90;" >/dev/null
}

# l4_checksums NS CLUSTER DB: one line per table of schema public: name|rows|md5 of all rows.
l4_checksums() {
  local ns=$1 cluster=$2 db=$3 t
  for t in $(db_sql "$ns" "$cluster" "$db" \
    "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"); do
    db_sql "$ns" "$cluster" "$db" \
      "SELECT '$t', count(*), md5(coalesce(string_agg(x::text, E'\n' ORDER BY x::text), '')) FROM $t x"
  done
}

# l4_same_data NS SOURCE TARGET DB: identical tables and per-table checksums, and not empty.
l4_same_data() {
  local ns=$1 src=$2 dst=$3 db=$4 want got
  want=$(l4_checksums "$ns" "$src" "$db")
  got=$(l4_checksums "$ns" "$dst" "$db")
  [[ -n "$want" ]] || fail "no tables in $ns/$src database $db"
  [[ "$got" == "$want" ]] || fail "restored data differs: $ns/$dst/$db has
$got
while $ns/$src/$db has
$want"
  say "$db: per-table row counts and md5 of $dst equal $src's: $(echo "$want" | cut -d'|' -f1,2 | tr '\n' ' ')"
}

# l4_wait_job NS JOB: Complete, or fail with its pods' states.
l4_wait_job() {
  local ns=$1 job=$2
  job_done() {
    local c
    c=$(kubectl -n "$ns" get job "$job" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type} {end}')
    [[ "$c" == *Failed* ]] && return 0
    [[ "$c" == *Complete* ]]
  }
  wait_until "Job $ns/$job to finish" "$E2E_TIMEOUT" job_done
  if [[ "$(kubectl -n "$ns" get job "$job" -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}')" != True ]]; then
    fail "Job $ns/$job failed: $(kubectl -n "$ns" get pods -l "batch.kubernetes.io/job-name=$job" \
      -o jsonpath='{range .items[*]}{.metadata.name}: {.status.containerStatuses[0].state.terminated.exitCode} {end}')"
  fi
}

# l4_wait_sql NS CLUSTER: the database answers (the pod runs; locally, the instance is up).
l4_wait_sql() {
  wait_until "$1/$2 to answer SQL" "$E2E_TIMEOUT" db_sql "$1" "$2" postgres "SELECT 1"
}

# The scheduled-backup Job (created from the operator's CronJob as the scheduler would) writes a
# complete backup; a restore Job built from the same template (args `restore`, pointed at a
# second cluster) restores it, and every table matches. Needs nothing beyond the CronJob.
scenario_l4_cronjob_backup_restore() {
  # A backup id is never reused, and the store outlives the namespace: a new name per run.
  local ns=e2e-l4 src=l4src dst=l4dst job rc=0 keys
  job=l4src-manual-$(date +%s)
  new_namespace "$ns"
  cluster "$ns" "$src" s3
  cluster "$ns" "$dst"
  wait_ready "$ns" "$src" "$dst"
  l4_wait_sql "$ns" "$src"
  l4_seed "$ns" "$src" app app
  say "seeded $ns/$src database app (as role app)"
  wait_until "CronJob $ns/$src-backup" "$E2E_TIMEOUT" kubectl -n "$ns" get "cronjob/$src-backup"
  kubectl -n "$ns" create job --from="cronjob/$src-backup" "$job" >/dev/null
  l4_wait_job "$ns" "$job"
  say "backup Job $job (from cronjob/$src-backup) Complete"
  keys=$(store_ls "e2e/$ns/$src/$job/") || rc=$?
  if ((rc == 2)); then
    say "(this platform cannot list the store; the Job's success stands for the manifest)"
  else
    ((rc == 0)) || fail "listing the store failed"
    [[ "$keys" == *"/$job/manifest.json"* ]] || fail "no manifest.json under e2e/$ns/$src/$job/: $keys"
    say "in the bucket: $(echo "$keys" | sed "s|e2e/$ns/$src/$job/||" | tr '\n' ' ')"
  fi
  # A restore Job the way the operator builds one: the backup Job's pod template, agent command
  # `restore --preserve-role app`, connected to the target cluster with its own superuser.
  kubectl -n "$ns" get cronjob "$src-backup" -o json | python3 -c '
import json, sys
ns, src, dst, backup = sys.argv[1:]
cron = json.load(sys.stdin)
template = cron["spec"]["jobTemplate"]
labels = {**template["metadata"]["labels"], "tusk.dev/cluster": dst, "app.kubernetes.io/instance": dst,
          "app.kubernetes.io/component": "restore"}
pod = template["spec"]["template"]
pod["metadata"]["labels"] = labels
container = pod["spec"]["containers"][0]
container["args"] = ["restore", "--preserve-role", "app"]
env = []
for var in container["env"]:
    name = var["name"]
    if name == "PGHOST":
        var["value"] = f"{dst}-rw.{ns}.svc"
    elif name in ("PGUSER", "PGPASSWORD"):
        var["valueFrom"]["secretKeyRef"]["name"] = f"{dst}-superuser"
    elif name == "TUSK_BACKUP_ID":
        var = {"name": name, "value": backup}
    elif name == "TUSK_COMPRESSION":
        continue
    env.append(var)
env.append({"name": "TUSK_WORK_DIR", "value": "/tmp"})  # the emptyDir of the template
container["env"] = env
job = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"name": f"{dst}-restore", "namespace": ns, "labels": labels},
       "spec": {**template["spec"], "backoffLimit": 0}}
print(json.dumps(job))
' "$ns" "$src" "$dst" "$job" | kubectl create -f - >/dev/null
  l4_wait_job "$ns" "$dst-restore"
  say "restore Job $dst-restore (agent \`restore\`, TUSK_CLUSTER=$src, backup $job) Complete"
  l4_same_data "$ns" "$src" "$dst" app
  drop_namespace "$ns"
}

# The user's flow with the samples: an on-demand Backup CR, then a new cluster restored from it.
scenario_l4_backup_restore_samples() {
  # The samples' names are fixed and the bucket outlives namespaces: a namespace per run keeps
  # the backup ids (<path>/<namespace>/<cluster>/<id>) from colliding with an earlier run's.
  local ns repo_samples="$repo/samples"
  ns=e2e-l4-samples-$(date +%s)
  [[ -f "$repo_samples/backup.yaml" && -f "$repo_samples/postgresql-restore.yaml" ]] \
    || skip "samples/backup.yaml and samples/postgresql-restore.yaml are not there yet"
  new_namespace "$ns"
  kubectl -n "$ns" apply -f "$repo_samples/postgresql-s3-minio.yaml" >/dev/null
  wait_ready "$ns" shop
  l4_wait_sql "$ns" shop
  l4_seed "$ns" shop shop shop
  say "seeded $ns/shop database shop (as role shop)"
  kubectl -n "$ns" apply -f "$repo_samples/backup.yaml" >/dev/null
  kubectl -n "$ns" wait backup/shop-manual --for=jsonpath='{.status.phase}'=Completed --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "Backup shop-manual not Completed: $(kubectl -n "$ns" get backup shop-manual -o jsonpath='{.status}')"
  say "Backup shop-manual Completed: $(kubectl -n "$ns" get backup shop-manual -o jsonpath='{.status.location} {.status.sizeBytes} bytes')"
  kubectl -n "$ns" apply -f "$repo_samples/postgresql-restore.yaml" >/dev/null
  kubectl -n "$ns" wait postgresql/shop-restored --for=condition=Restored --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "shop-restored not Restored: $(kubectl -n "$ns" get postgresql shop-restored -o jsonpath='{.status.conditions}')"
  wait_ready "$ns" shop-restored
  say "shop-restored Restored and Ready"
  l4_wait_sql "$ns" shop-restored
  l4_same_data "$ns" shop shop-restored shop
  # The owner's role came back from the backup, but with shop-restored's own password (its Secret).
  local app
  app=$(app_sql "$ns" shop-restored "SELECT current_user || '|' || count(*) FROM orders") \
    || fail "the application owner cannot use shop-restored with the password in shop-restored-app"
  [[ "$app" == "shop|20000" ]] || fail "as the app owner: '$app', want 'shop|20000'"
  say "the app owner logs into shop-restored with shop-restored-app's password and reads its 20000 orders"
  drop_namespace "$ns"
}

ALL_SCENARIOS+=(l4_cronjob_backup_restore l4_backup_restore_samples)
