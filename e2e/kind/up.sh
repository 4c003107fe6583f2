#!/usr/bin/env bash
# A kind cluster with Tusk built from this checkout, and MinIO for its backups. Needs Docker,
# kind and kubectl. Idempotent: an existing cluster of the same name is reused.
#
#   eval "$(e2e/kind/up.sh)"   # prints only `export KUBECONFIG=...` on stdout
#   e2e/kind/run.sh       # the scenarios, with a real backup -> restore round trip
#   e2e/kind/down.sh
#
# TUSK_KIND_CLUSTER (default tusk), KIND_NODE_IMAGE (default: kind's), TUSK_E2E_KIND_DIR (default
# ${TMPDIR:-/tmp}/tusk-e2e-kind: the kubeconfig), TUSK_SKIP_BUILD=1 to reuse loaded images.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
CLUSTER="${TUSK_KIND_CLUSTER:-tusk}"
DIR="${TUSK_E2E_KIND_DIR:-${TMPDIR:-/tmp}/tusk-e2e-kind}"
KUBECONFIG_FILE="$DIR/kubeconfig"
# The tag e2e/kind/tusk/kustomization.yaml installs.
OPERATOR_IMAGE=ghcr.io/tusk-operator/tusk:e2e
AGENT_IMAGE=ghcr.io/tusk-operator/backup-agent:e2e

if [[ "${1:-}" == --kubeconfig-path ]]; then echo "$KUBECONFIG_FILE"; exit 0; fi
log() { echo "kind/up.sh: $*" >&2; }
# Only the export line goes to stdout (for eval); every tool's output goes to stderr.
exec 3>&1 1>&2
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { log "$tool not found on PATH"; exit 1; }
done
started=$SECONDS
mkdir -p "$DIR"

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "kind cluster $CLUSTER exists; reusing it"
else
  log "creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" --config "$here/kind-config.yaml" \
    ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 5m
fi
kind get kubeconfig --name "$CLUSTER" >"$KUBECONFIG_FILE"
export KUBECONFIG="$KUBECONFIG_FILE"

if [[ "${TUSK_SKIP_BUILD:-}" != 1 ]]; then
  log "building $OPERATOR_IMAGE and $AGENT_IMAGE from the one Dockerfile"
  DOCKER_BUILDKIT=1 docker build --target operator -t "$OPERATOR_IMAGE" "$repo"
  DOCKER_BUILDKIT=1 docker build --target backup-agent -t "$AGENT_IMAGE" "$repo"
  kind load docker-image --name "$CLUSTER" "$OPERATOR_IMAGE" "$AGENT_IMAGE"
fi

log "MinIO in namespace minio, bucket tusk-backups"
kubectl apply -f "$here/minio.yaml" >/dev/null
kubectl -n minio rollout status deployment/minio --timeout=5m
kubectl -n minio wait job/make-bucket --for=condition=Complete --timeout=5m >/dev/null

log "Tusk: deploy/ with the e2e images"
kubectl apply --server-side -k "$here/tusk" >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/postgresqls.tusk.dev crd/backups.tusk.dev >/dev/null
# A rebuilt image under the same tag needs new pods to be picked up.
if [[ "${TUSK_SKIP_BUILD:-}" != 1 ]]; then kubectl -n tusk-system rollout restart deployment/tusk-operator >/dev/null; fi
kubectl -n tusk-system rollout status deployment/tusk-operator --timeout=5m

log "ready in $((SECONDS - started))s"
echo "export KUBECONFIG=$KUBECONFIG_FILE" >&3
