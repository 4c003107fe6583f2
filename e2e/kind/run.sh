#!/usr/bin/env bash
# The end-to-end scenarios on the kind cluster of e2e/kind/up.sh, then a real backup -> restore
# round trip: a seeded table in `shop` (samples/postgresql-s3-minio.yaml), an on-demand Backup
# (samples/backup.yaml), a new cluster restored from it (samples/postgresql-restore.yaml), and
# per-table checksums compared (scenario l4_backup_restore_samples in e2e/scenarios-l4.sh).
#
#   e2e/kind/run.sh                 # every scenario, the L4 ones last
#   e2e/kind/run.sh SCENARIO...     # just these (e.g. l4_backup_restore_samples)
# E2E_TIMEOUT defaults to 600 s here: real pods pull images and run initdb.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBECONFIG="$("$here/up.sh" --kubeconfig-path)"
[[ -f "$KUBECONFIG" ]] || { echo "kind/run.sh: no kubeconfig at $KUBECONFIG (run e2e/kind/up.sh)" >&2; exit 1; }
export KUBECONFIG
# TUSK_E2E_L4=1 adds the scenarios of e2e/scenarios-l4.sh; their default hooks fit real pods
# (psql through kubectl exec). scenarios.sh's own defaults fit the operator's Deployment.
export E2E_TIMEOUT="${E2E_TIMEOUT:-600}" TUSK_E2E_L4=1
exec "$here/../scenarios.sh" "$@"
