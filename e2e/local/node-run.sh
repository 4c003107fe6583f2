#!/usr/bin/env bash
# Real pods, no Docker: the local control plane (up.sh, without kwok), a real node (node.sh),
# our images built from the Dockerfile (images.sh), the operator as deploy/'s Deployment, then
# e2e/local/node-check.sh. Prints the time of every stage.
#   e2e/local/node-run.sh [--keep] [CHECK...]    # --keep leaves it all running
# State in ${TUSK_E2E_DIR:-/tmp/tusk-e2e-node}; e2e/local/down.sh (with that TUSK_E2E_DIR) stops it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export TUSK_E2E_DIR=${TUSK_E2E_DIR:-/tmp/tusk-e2e-node}
keep=0
if [[ "${1:-}" == --keep ]]; then keep=1; shift; fi

times=()
stage() { # NAME COMMAND...
  local name=$1 t=$SECONDS; shift
  printf '\n==> %s\n' "$name"
  "$@"
  times+=("$(printf '%-28s %4ss' "$name" "$((SECONDS - t))")")
}
summary() { printf '\nstage times:\n'; printf '  %s\n' "${times[@]}"; }
cleanup() {
  local rc=$?
  summary
  if ((keep)) && ((rc == 0)); then
    echo "left running: source $TUSK_E2E_DIR/env; stop with TUSK_E2E_DIR=$TUSK_E2E_DIR e2e/local/down.sh"
  else
    TUSK_E2E_DIR=$TUSK_E2E_DIR "$here/down.sh" >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT

stage "node packages (apt)" "$here/node-deps.sh"
binaries() { "$here/binaries.sh" >/dev/null; }
stage "binaries (Go, cached)" binaries
stage "images (podman)" "$here/images.sh" all
stage "control plane (no kwok)" env TUSK_E2E_KWOK=0 "$here/up.sh" >/dev/null
stage "node up (+ image load)" "$here/node.sh" up
# shellcheck disable=SC1091
source "$TUSK_E2E_DIR/env"
operator() {
  kubectl apply --server-side -k "$here/node/tusk" >/dev/null
  kubectl -n tusk-system rollout status deployment/tusk-operator --timeout=300s
}
stage "operator Deployment" operator
stage "checks" "$here/node-check.sh" "$@"
cd "$repo"
