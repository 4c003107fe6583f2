# shellcheck shell=bash
# Backup lifecycle scenarios (L4): Backup CRs, recorded scheduled runs, retention, restore into a
# new cluster, and the bucket-cleaning finalizer — all driven by the operator, with every Job it
# generates run by the real backup-agent (locally: e2e/local/l4.sh's job runner; on kind: pods).
# Sourced by e2e/scenarios.sh after e2e/scenarios-l4.sh (whose l4_* helpers it uses) when
# TUSK_E2E_L4=1.
#
# The operator reads manifests and empties prefixes itself, so the destination's endpoint must be
# reachable from where the operator runs: in-cluster MinIO on kind, the local MinIO when the
# operator is a local process (E2E_S3_ENDPOINT, default $TUSK_E2E_MINIO_ENDPOINT).
# shellcheck disable=SC2154
# Predicates handed to wait_until are only invoked through it:
# shellcheck disable=SC2329

E2E_S3_ENDPOINT=${E2E_S3_ENDPOINT:-${TUSK_E2E_MINIO_ENDPOINT:-http://minio.minio.svc.cluster.local:9000}}
# Backup ids are never reused and buckets outlive namespaces: one suffix per run.
E2E_RUN_ID=${E2E_RUN_ID:-$(date +%s)}

# backup_cluster NS NAME [KEEP] [ON_DELETE] [ENDPOINT]: a cluster with S3 backups under path
# `lifecycle` (a path of its own, so that deleting a prefix can be checked exactly).
backup_cluster() {
  local ns=$1 name=$2 keep=${3:-5} on_delete=${4:-Retain} endpoint=${5:-$E2E_S3_ENDPOINT}
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Secret
metadata: {name: e2e-s3, namespace: $ns}
stringData: {access-key: minioadmin, secret-key: minioadmin}
---
apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {name: $name, namespace: $ns}
spec:
  version: "18"
  storage: {size: 1Gi}
  backup:
    schedule: "0 2 * * *"
    retention: {keep: $keep}
    onDelete: $on_delete
    destination:
      s3:
        bucket: tusk-backups
        path: lifecycle
        endpoint: $endpoint
        forcePathStyle: true
        credentials:
          accessKeyId: {name: e2e-s3, key: access-key}
          secretAccessKey: {name: e2e-s3, key: secret-key}
YAML
}

# take_backup NS CLUSTER NAME: an on-demand Backup, waited for until Completed; prints seconds
# from `kubectl apply` to Completed.
take_backup() {
  local ns=$1 cluster=$2 name=$3 started
  started=$(date +%s.%N)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: tusk.dev/v1alpha1
kind: Backup
metadata: {name: $name, namespace: $ns}
spec: {cluster: {name: $cluster}}
YAML
  kubectl -n "$ns" wait "backup/$name" --for=condition=Completed --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "Backup $ns/$name not Completed: $(kubectl -n "$ns" get backup "$name" -o jsonpath='{.status}')"
  python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$started"
}

# prefix_keys NS CLUSTER: the keys under the cluster's prefix (empty output when none).
prefix_keys() { store_ls "lifecycle/$1/$2/"; }
store_listable() {
  local rc=0
  store_ls "lifecycle/" >/dev/null || rc=$?
  ((rc != 2)) || skip "this platform cannot list the store"
}

backup_field() { kubectl -n "$1" get backup "$2" -o jsonpath="{$3}"; }

# An on-demand Backup: Job owned by the Backup, Completed only with its manifest in the bucket,
# its status complete, and the cluster's status pointing at it.
scenario_backup_on_demand() {
  local ns=e2e-backup-demand name="manual-$E2E_RUN_ID" took keys
  store_listable
  new_namespace "$ns"
  backup_cluster "$ns" db
  wait_ready "$ns" db
  l4_wait_sql "$ns" db
  l4_seed "$ns" db app app
  took=$(take_backup "$ns" db "$name")
  say "kubectl apply of Backup $name -> Completed in ${took}s"
  jsonpath_is "$ns" "job/$name" '{.metadata.ownerReferences[0].kind}' Backup
  keys=$(prefix_keys "$ns" db)
  [[ "$keys" == *"lifecycle/$ns/db/$name/manifest.json"* ]] || fail "no manifest for $name in the bucket: $keys"
  [[ "$(backup_field "$ns" "$name" .status.location)" == "s3://tusk-backups/lifecycle/$ns/db/$name/" ]] \
    || fail "location: $(backup_field "$ns" "$name" .status.location)"
  (($(backup_field "$ns" "$name" .status.sizeBytes) > 0)) || fail "sizeBytes is not positive"
  [[ "$(backup_field "$ns" "$name" .status.sha256)" =~ ^[0-9a-f]{64}$ ]] || fail "sha256 missing"
  [[ -n "$(backup_field "$ns" "$name" .status.postgresVersion)" ]] || fail "postgresVersion missing"
  last_backup() { [[ "$(kubectl -n "$ns" get postgresql db -o jsonpath='{.status.lastSuccessfulBackup.name}')" == "$name" ]]; }
  wait_until "lastSuccessfulBackup of $ns/db to be $name" "$E2E_TIMEOUT" last_backup
  kubectl -n "$ns" wait postgresql/db --for=condition=LastBackupSucceeded --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "LastBackupSucceeded is not True"
  say "status: $(backup_field "$ns" "$name" '.status.sizeBytes') bytes, postgres $(backup_field "$ns" "$name" '.status.postgresVersion'); cluster LAST BACKUP = $name"
  drop_namespace "$ns"
}

# A run of the backup CronJob (a Job created from it, as the CronJob controller would) is
# recorded as a Backup, Completed from its manifest, and the Job is marked as recorded.
scenario_backup_scheduled_run_recorded() {
  local ns=e2e-backup-scheduled job="db-backup-$E2E_RUN_ID"
  new_namespace "$ns"
  backup_cluster "$ns" db
  wait_ready "$ns" db
  l4_wait_sql "$ns" db
  wait_until "CronJob $ns/db-backup" "$E2E_TIMEOUT" kubectl -n "$ns" get cronjob/db-backup
  kubectl -n "$ns" create job --from=cronjob/db-backup "$job" >/dev/null
  wait_until "Backup $ns/$job recording the scheduled run" "$E2E_TIMEOUT" kubectl -n "$ns" get "backup/$job"
  kubectl -n "$ns" wait "backup/$job" --for=condition=Completed --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "recorded Backup $job not Completed: $(backup_field "$ns" "$job" .status)"
  jsonpath_is "$ns" "backup/$job" '{.metadata.labels.tusk\.dev/scheduled}' true
  jsonpath_is "$ns" "job/$job" '{.metadata.annotations.tusk\.dev/recorded-as}' "$job"
  [[ -z "$(kubectl -n "$ns" get backup "$job" -o jsonpath='{.metadata.ownerReferences}')" ]] \
    || fail "a recorded Backup must not be owned by its cluster"
  say "scheduled Job $job recorded as Backup $job: $(backup_field "$ns" "$job" .status.location)"
  drop_namespace "$ns"
}

# keep: 1 — after the second backup completes, the first one's objects and then its Backup go;
# the newest stays.
scenario_backup_retention() {
  local ns=e2e-backup-retention first="r1-$E2E_RUN_ID" second="r2-$E2E_RUN_ID"
  store_listable
  new_namespace "$ns"
  backup_cluster "$ns" db 1
  wait_ready "$ns" db
  l4_wait_sql "$ns" db
  take_backup "$ns" db "$first" >/dev/null
  take_backup "$ns" db "$second" >/dev/null
  wait_until "Backup $ns/$first to be deleted by retention" "$E2E_TIMEOUT" absent "$ns" "backup/$first"
  local keys
  keys=$(prefix_keys "$ns" db)
  [[ "$keys" != *"/$first/"* ]] || fail "objects of $first are still in the bucket: $keys"
  [[ "$keys" == *"/$second/manifest.json"* ]] || fail "the newest backup $second is gone: $keys"
  exists "$ns" "backup/$second" || fail "Backup $second was deleted"
  say "keep: 1 deleted $first (objects, then the Backup) and kept $second"
  drop_namespace "$ns"
}

# A new cluster restored from a Backup: Restored before Ready, restoredFrom recorded, and every
# table equal to the source's by per-table checksums.
scenario_backup_restore_into_new_cluster() {
  local ns=e2e-backup-restore name="src-$E2E_RUN_ID"
  new_namespace "$ns"
  backup_cluster "$ns" db
  wait_ready "$ns" db
  l4_wait_sql "$ns" db
  l4_seed "$ns" db app app
  # The Backup and the cluster restoring from it in one apply: the restore waits for the Backup
  # and starts when it completes (its events wake the waiting cluster).
  kubectl apply -f - >/dev/null <<YAML
apiVersion: tusk.dev/v1alpha1
kind: Backup
metadata: {name: $name, namespace: $ns}
spec: {cluster: {name: db}}
---
apiVersion: tusk.dev/v1alpha1
kind: PostgreSQL
metadata: {name: copy, namespace: $ns}
spec:
  version: "18"
  storage: {size: 1Gi}
  restore: {backup: {name: $name}}
YAML
  kubectl -n "$ns" wait postgresql/copy --for=condition=Restored --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "copy not Restored: $(kubectl -n "$ns" get postgresql copy -o jsonpath='{.status.conditions}')"
  wait_ready "$ns" copy
  jsonpath_is "$ns" postgresql/copy '{.status.restoredFrom.backupId}' "$name"
  l4_wait_sql "$ns" copy
  l4_same_data "$ns" db copy app
  # Once restored, never again: the Job is not re-created after it is deleted.
  kubectl -n "$ns" delete job copy-restore --wait=true >/dev/null
  kubectl -n "$ns" patch postgresql copy --type=merge -p '{"spec":{"parameters":{"work_mem":"8MB"}}}' >/dev/null
  wait_until "copy to observe its new generation" "$E2E_TIMEOUT" \
    jsonpath_is "$ns" postgresql/copy '{.status.observedGeneration}' 2
  absent "$ns" job/copy-restore || fail "the restore Job was re-created after the cluster was restored"
  drop_namespace "$ns"
}

# onDelete: Delete empties exactly <path>/<ns>/<cluster>/: a cluster named db2 and a cluster db
# in another namespace keep their objects, and only the deleted cluster's Backups go.
scenario_backup_delete_empties_only_its_prefix() {
  local ns=e2e-backup-delete other=e2e-backup-delete-other
  store_listable
  new_namespace "$ns"
  new_namespace "$other"
  backup_cluster "$ns" db 5 Delete
  backup_cluster "$ns" db2 5 Delete
  backup_cluster "$other" db 5 Delete
  wait_ready "$ns" db db2
  wait_ready "$other" db
  take_backup "$ns" db "d1-$E2E_RUN_ID" >/dev/null
  take_backup "$ns" db2 "d2-$E2E_RUN_ID" >/dev/null
  take_backup "$other" db "d3-$E2E_RUN_ID" >/dev/null
  kubectl -n "$ns" delete postgresql db --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "db was not deleted: $(kubectl -n "$ns" get postgresql db -o jsonpath='{.status.conditions}')"
  [[ -z "$(prefix_keys "$ns" db)" ]] || fail "lifecycle/$ns/db/ still holds: $(prefix_keys "$ns" db)"
  [[ -n "$(prefix_keys "$ns" db2)" ]] || fail "lifecycle/$ns/db2/ was emptied too"
  [[ -n "$(prefix_keys "$other" db)" ]] || fail "lifecycle/$other/db/ was emptied too"
  absent "$ns" "backup/d1-$E2E_RUN_ID" || fail "the deleted cluster's Backup is still there"
  exists "$ns" "backup/d2-$E2E_RUN_ID" || fail "db2's Backup was deleted"
  say "deleted lifecycle/$ns/db/ only; $ns/db2 and $other/db keep their objects and Backups"
  # A namespace deletion may remove the credentials Secret before the cluster: Retain first.
  kubectl -n "$ns" patch postgresql db2 --type=merge -p '{"spec":{"backup":{"onDelete":"Retain"}}}' >/dev/null
  kubectl -n "$other" patch postgresql db --type=merge -p '{"spec":{"backup":{"onDelete":"Retain"}}}' >/dev/null
  drop_namespace "$ns" "$other"
}

# onDelete: Retain (the default): the cluster goes at once; objects and Backups stay, and the
# Backup is still restorable.
scenario_backup_retain_keeps_everything() {
  local ns=e2e-backup-retain name="keep-$E2E_RUN_ID"
  store_listable
  new_namespace "$ns"
  backup_cluster "$ns" db 5 Retain
  wait_ready "$ns" db
  take_backup "$ns" db "$name" >/dev/null
  kubectl -n "$ns" delete postgresql db --timeout="${E2E_TIMEOUT}s" >/dev/null || fail "db was not deleted"
  [[ "$(prefix_keys "$ns" db)" == *"/$name/manifest.json"* ]] || fail "Retain deleted objects"
  jsonpath_is "$ns" "backup/$name" '{.status.phase}' Completed
  say "db deleted; its objects and Backup $name remain"
  drop_namespace "$ns"
}

# A store that cannot be reached blocks deletion with a condition; switching to Retain releases.
scenario_backup_unreachable_store_on_delete() {
  local ns=e2e-backup-unreachable
  new_namespace "$ns"
  backup_cluster "$ns" db 5 Delete http://127.0.0.1:9
  wait_ready "$ns" db
  kubectl -n "$ns" delete postgresql db --wait=false >/dev/null
  kubectl -n "$ns" wait postgresql/db --for=condition=Cleanup=False --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "no Cleanup=False condition: $(kubectl -n "$ns" get postgresql db -o jsonpath='{.status.conditions}')"
  jsonpath_is "$ns" postgresql/db '{.status.conditions[?(@.type=="Cleanup")].reason}' StoreUnreachable
  exists "$ns" postgresql/db || fail "the cluster was released without emptying its prefix"
  kubectl -n "$ns" patch postgresql db --type=merge -p '{"spec":{"backup":{"onDelete":"Retain"}}}' >/dev/null
  kubectl -n "$ns" wait postgresql/db --for=delete --timeout="${E2E_TIMEOUT}s" >/dev/null \
    || fail "switching to Retain did not release the cluster"
  say "Cleanup=False/StoreUnreachable while the store was down; released by onDelete: Retain"
  drop_namespace "$ns"
}

ALL_SCENARIOS+=(backup_on_demand backup_scheduled_run_recorded backup_retention
  backup_restore_into_new_cluster backup_delete_empties_only_its_prefix
  backup_retain_keeps_everything backup_unreachable_store_on_delete)
