#!/usr/bin/env bash
# Deletes the kind cluster of e2e/kind/up.sh (and with it Tusk, MinIO and every backup in it).
set -euo pipefail
CLUSTER="${TUSK_KIND_CLUSTER:-tusk}"
DIR="${TUSK_E2E_KIND_DIR:-${TMPDIR:-/tmp}/tusk-e2e-kind}"
kind delete cluster --name "$CLUSTER"
rm -f "$DIR/kubeconfig"
