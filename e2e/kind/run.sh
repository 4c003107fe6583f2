#!/usr/bin/env bash
# The end-to-end scenarios (the tusk-e2e crate, e2e/tests/) on the kind cluster of
# e2e/kind/up.sh, the L4 ones included: e.g. l4_backup_restore_samples seeds `shop`
# (samples/postgresql-s3-minio.yaml), takes an on-demand Backup (samples/backup.yaml), restores
# it into a new cluster (samples/postgresql-restore.yaml) and compares per-table checksums.
#
#   e2e/kind/run.sh                 # every scenario
#   e2e/kind/run.sh SCENARIO...     # just these test functions (e.g. l4_backup_restore_samples)
# E2E_TIMEOUT defaults to 600 s here: real pods pull images and run initdb. The platform is
# `in-cluster` (the operator is the Deployment of deploy/; SQL through kubectl exec); scenarios
# needing a hook it lacks (pod readiness by annotation, the audit log, listing the bucket)
# report SKIP.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBECONFIG="$("$here/up.sh" --kubeconfig-path)"
[[ -f "$KUBECONFIG" ]] || { echo "kind/run.sh: no kubeconfig at $KUBECONFIG (run e2e/kind/up.sh)" >&2; exit 1; }
export KUBECONFIG
export E2E_TIMEOUT="${E2E_TIMEOUT:-600}" TUSK_E2E_L4=1 E2E_PLATFORM=in-cluster
filters=(--test-threads=1 --nocapture)
if (($#)); then filters+=(--exact "$@"); fi
cd "$here/../.."
exec cargo test --locked --no-fail-fast -p tusk-e2e -- --ignored "${filters[@]}"
