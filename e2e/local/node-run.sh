#!/usr/bin/env bash
# Real pods, no Docker: the local control plane (up.sh, without kwok), a real node (node.sh),
# our images built from the Dockerfile (images.sh), the operator as deploy/'s Deployment, MinIO
# in-cluster from e2e/kind/minio.yaml, then the tusk-e2e scenarios on the `node` platform (the
# operator's pod, kubectl exec for SQL, MinIO through its Service). Prints the time of every stage.
#   e2e/local/node-run.sh [--keep] [SCENARIO...]    # --keep leaves it all running
# Scenarios: all of e2e/tests/ when none are named (test function names).
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
# Our binaries from this host's cargo by default (the images otherwise as the Dockerfile makes
# them); TUSK_IMAGE_BINARIES=source compiles them inside the image build, as users do.
stage "images (podman)" env TUSK_IMAGE_BINARIES="${TUSK_IMAGE_BINARIES:-host}" "$here/images.sh" all
stage "control plane (no kwok)" env TUSK_E2E_KWOK=0 "$here/up.sh" >/dev/null
stage "node up (+ image load)" "$here/node.sh" up
# shellcheck disable=SC1091
source "$TUSK_E2E_DIR/env"
operator() {
  kubectl apply --server-side -k "$here/node/tusk" >/dev/null
  kubectl -n tusk-system rollout status deployment/tusk-operator --timeout=300s
}
stage "operator Deployment" operator
minio() {
  # The kind manifests with the locally built images (nothing can be pulled here).
  sed -e 's#docker.io/minio/minio:[^[:space:]]*#localhost/tusk-test/minio:e2e#' \
      -e 's#docker.io/curlimages/curl:[^[:space:]]*#localhost/tusk-test/minio:e2e#' \
      -e 's#imagePullPolicy: IfNotPresent#imagePullPolicy: Never#' \
      "$repo/e2e/kind/minio.yaml" | kubectl apply --server-side -f - >/dev/null
  kubectl -n minio wait --for=condition=Complete job/make-bucket --timeout=300s
}
stage "MinIO in-cluster" minio

# Every scenario of e2e/tests/ (the same ones kwok's runs use; those needing a hook this
# platform lacks, such as making a pod unready by hand, report SKIP), unless some are named.
scenarios() {
  export E2E_PLATFORM=node TUSK_E2E_L4=1 E2E_TIMEOUT=${E2E_TIMEOUT:-300}
  export TUSK_E2E_PG_IMAGE=${TUSK_E2E_PG_IMAGE:-localhost/tusk-test/postgres:15}
  export TUSK_E2E_PG_VERSION=${TUSK_E2E_PG_VERSION:-15}
  export TUSK_E2E_PG_NEXT_IMAGE=${TUSK_E2E_PG_NEXT_IMAGE:-localhost/tusk-test/postgres:17}
  export TUSK_E2E_PG_NEXT_VERSION=${TUSK_E2E_PG_NEXT_VERSION:-17}
  export TUSK_E2E_POOLER_IMAGE=${TUSK_E2E_POOLER_IMAGE:-localhost/tusk-test/pgbouncer:e2e}
  export E2E_SUMMARY="$TUSK_E2E_DIR/summary"
  export E2E_LEVELS=pods,node,own-control-plane,l4
  : >"$E2E_SUMMARY"
  local rc=0 filters=(--test-threads=1 --nocapture)
  if (($#)); then filters+=(--exact "$@"); fi
  # The plugin the scenarios run (plugin.rs, the client certificate in least_privilege.rs) and
  # the scenarios, from the workspace's test build (scripts/workspace-tests.sh), the plugin
  # copied so a concurrent build cannot swap it mid-run.
  local tests="$repo/scripts/workspace-tests.sh" summary_bin
  install -m 0755 "$("$tests" bin kubectl-tusk)" "$TUSK_E2E_DIR/kubectl-tusk"
  summary_bin=$("$tests" bin tusk-e2e-summary)
  export TUSK_KUBECTL_TUSK_BIN="$TUSK_E2E_DIR/kubectl-tusk"
  "$tests" each tusk-e2e -- --ignored "${filters[@]}" || rc=$?
  printf '\n=== scenarios on the real node (levels: %s)\n' "$E2E_LEVELS"
  cat "$E2E_SUMMARY"
  "$tests" each tusk-e2e -- --ignored --list "${filters[@]}" >"$TUSK_E2E_DIR/listed"
  "$summary_bin" "$TUSK_E2E_DIR/listed" "$E2E_SUMMARY" || rc=1
  # A named scenario must have passed: a skip, a rename or a removal (--exact then matches
  # nothing and cargo exits 0) fails the run instead of passing it silently.
  local name missing=()
  for name in "$@"; do
    grep -qE "^PASS +[0-9]+s +$name\$" "$E2E_SUMMARY" || missing+=("$name")
  done
  if ((${#missing[@]})); then
    echo "named scenarios that did not pass (failed, skipped, renamed or gone): ${missing[*]}" >&2
    rc=1
  fi
  return "$rc"
}
stage "scenarios" scenarios "$@"
