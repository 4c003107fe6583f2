#!/usr/bin/env bash
# What can be proven about e2e/kind/ without Docker: the scripts are shellcheck-clean, and every
# manifest (MinIO, and deploy/ with the kind image overrides) is accepted by a real API server
# (`kubectl apply --dry-run=server`), e.g. the local control plane of e2e/local/up.sh.
#   KUBECONFIG=... e2e/kind/check.sh [--smoke]
# --smoke also runs e2e/kind/up.sh against that API server with `docker` and `kind` replaced by
# stubs that record their calls: everything but the image builds and the node runs for real
# (MinIO, its bucket Job, deploy/ with the overrides, the rollouts). It installs into the cluster:
# meant for a throwaway control plane such as e2e/local's (where kwok completes the bucket Job's
# pod when this script annotates it).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
log() { echo "kind/check.sh: $*"; }

# The pinned shellcheck, as scripts/e2e.sh uses it (it exports TUSK_SHELLCHECK_BIN; run alone,
# this installs it): another version gives another verdict, and a new machine has none on PATH.
if [[ -z "${TUSK_SHELLCHECK_BIN:-}" ]]; then
  eval "$("$repo/scripts/testbin.sh" shellcheck)"
fi
(cd "$repo" && "$TUSK_SHELLCHECK_BIN" -x e2e/kind/*.sh)
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

[[ "${1:-}" == --smoke ]] || exit 0

stubs=$(mktemp -d -t tusk-kind-stubs.XXXXXX)
annotator=""
# shellcheck disable=SC2329 # invoked by the EXIT trap
cleanup() {
  if [[ -n "$annotator" ]]; then kill "$annotator" 2>/dev/null || true; fi
  rm -rf "$stubs"
}
trap cleanup EXIT
kubeconfig=$(mktemp "$stubs/kubeconfig.XXXXXX")
kubectl config view --raw --minify >"$kubeconfig"
cat >"$stubs/docker" <<'STUB'
#!/usr/bin/env bash
echo "docker $*" >>"$(dirname "$0")/calls"
STUB
cat >"$stubs/kind" <<STUB
#!/usr/bin/env bash
echo "kind \$*" >>"$stubs/calls"
case "\$1 \$2" in
  "get clusters") echo tusk ;;
  "get kubeconfig") cat "$kubeconfig" ;;
esac
STUB
chmod +x "$stubs/docker" "$stubs/kind"
# kwok runs no container: finish the bucket Job's pod the way e2e/local/stages.yaml expects.
(
  for _ in $(seq 600); do
    for pod in $(kubectl -n minio get pods -l app.kubernetes.io/name=minio-make-bucket \
      --field-selector=status.phase=Running -o name 2>/dev/null); do
      kubectl -n minio annotate --overwrite "$pod" e2e.tusk.dev/exit-code=0 >/dev/null 2>&1 && exit 0
    done
    sleep 0.5
  done
) &
annotator=$!
replicas=$(kubectl -n tusk-system get deployment tusk-operator -o jsonpath='{.spec.replicas}' 2>/dev/null || true)
export_line=$(PATH="$stubs:$PATH" TUSK_E2E_KIND_DIR="$stubs/dir" "$here/up.sh" 2>"$stubs/up.log") \
  || { cat "$stubs/up.log" >&2; echo "e2e/kind/up.sh failed" >&2; exit 1; }
[[ "$export_line" == "export KUBECONFIG=$stubs/dir/kubeconfig" ]] || { echo "up.sh printed: $export_line" >&2; exit 1; }
for want in "docker build --target operator -t ghcr.io/tusk-operator/tusk:e2e" \
  "docker build --target backup-agent -t ghcr.io/tusk-operator/backup-agent:e2e" \
  "kind load docker-image --name tusk ghcr.io/tusk-operator/tusk:e2e ghcr.io/tusk-operator/backup-agent:e2e"; do
  grep -qF "$want" "$stubs/calls" || { echo "up.sh never ran: $want" >&2; cat "$stubs/calls" >&2; exit 1; }
done
got=$(kubectl -n tusk-system get deployment tusk-operator \
  -o jsonpath='{.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].env[?(@.name=="TUSK_AGENT_IMAGE")].value}')
[[ "$got" == "ghcr.io/tusk-operator/tusk:e2e ghcr.io/tusk-operator/backup-agent:e2e" ]] \
  || { echo "the installed operator runs '$got'" >&2; exit 1; }
[[ "$(kubectl -n minio get job make-bucket -o jsonpath='{.status.succeeded}')" == 1 ]] \
  || { echo "the bucket Job did not succeed" >&2; exit 1; }
log "up.sh with stubbed docker/kind: images built and loaded as intended, MinIO rolled out, bucket Job done, Tusk rolled out with the e2e images"
# The platform ran the operator its own way before (e2e/local: a process, the Deployment at 0).
if [[ -n "$replicas" ]]; then kubectl -n tusk-system scale deployment tusk-operator --replicas="$replicas" >/dev/null; fi
