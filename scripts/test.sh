#!/usr/bin/env bash
# The one test command: formatting, lints, CRD drift, manifests, every test of the workspace
# (unit, mock-API scenarios, and the agent's tests against real PostgreSQL, MinIO and the GCS
# emulator), then the end-to-end suite on a local control plane (scripts/e2e.sh; TUSK_SKIP_E2E=1
# leaves it out). Installs what it needs when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
started=$SECONDS

step "System packages"
scripts/install-deps.sh

step "Upstream test binaries (MinIO, fake-gcs-server)"
eval "$(scripts/testbin.sh)"
export TUSK_MINIO_BIN TUSK_FAKE_GCS_BIN

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "CRDs in crds/ match the Rust types"
generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
cargo run --quiet --locked -p tusk -- crd --output-dir "$generated"
for file in "$generated"/*.yaml; do
  if ! diff -u "crds/$(basename "$file")" "$file"; then
    echo "crds/ is stale: run 'cargo run -- crd --output-dir crds' and commit the result" >&2
    exit 1
  fi
done

step "Manifests build with kustomize"
if command -v kubectl >/dev/null; then
  kubectl kustomize deploy >/dev/null
  echo "deploy/ renders $(kubectl kustomize deploy | grep -c '^kind:') objects"
else
  echo "kubectl not found; skipping the kustomize render (the e2e suite covers it)"
fi

step "cargo test --workspace"
cargo test --workspace --locked

if [[ "${TUSK_SKIP_E2E:-0}" == 1 ]]; then
  echo "TUSK_SKIP_E2E=1: skipping the end-to-end suite"
else
  step "End-to-end suite (scripts/e2e.sh)"
  scripts/e2e.sh
fi

echo
echo "All checks passed in $((SECONDS - started))s."
