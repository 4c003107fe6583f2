#!/usr/bin/env bash
# The local end-to-end run: pinned upstream binaries -> control plane on loopback -> the operator
# (built from this tree, run as a process with its own ServiceAccount's token) -> the scenarios
# of the tusk-e2e crate (e2e/tests/, run with --ignored from the workspace's test build:
# scripts/workspace-tests.sh) -> teardown. No Docker, no internet beyond the Go module proxy and
# crates.io for cold builds.
# Usage: e2e/local/run.sh [--keep] [SCENARIO...]
#   --keep    leave the control plane and the operator running (stop with e2e/local/down.sh)
#   SCENARIO  test function names (e.g. backup_on_demand), matched exactly; all when none
# Environment: TUSK_E2E_DIR (run directory; default a new /tmp/tusk-e2e.XXXXXX), CARGO_TARGET_DIR,
# E2E_TIMEOUT, E2E_ARTIFACTS (diagnostics of failed scenarios), TUSK_E2E_L4=1 (add e2e/local/l4.sh
# and the L4 scenarios).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
keep=0
if [[ "${1:-}" == "--keep" ]]; then keep=1; shift; fi

timings=()
step_name=""
step_started=$SECONDS
# step NAME: ends the current step (noting its duration) and starts NAME ("" to just end).
step() {
  if [[ -n "$step_name" ]]; then timings+=("$(printf '%5ss  %s' $((SECONDS - step_started)) "$step_name")"); fi
  step_name=$1
  step_started=$SECONDS
  if [[ -n "$1" ]]; then printf '\n==> %s\n' "$1"; fi
}

export TUSK_E2E_DIR="${TUSK_E2E_DIR:-$(mktemp -d -u /tmp/tusk-e2e.XXXXXX)}"
# shellcheck disable=SC2317,SC2329 # invoked by the EXIT trap (SC2317 is 0.9's name for it)
cleanup() {
  local rc=$? started=$SECONDS
  if ((keep)); then
    echo "kept: source $TUSK_E2E_DIR/env; stop with: TUSK_E2E_DIR=$TUSK_E2E_DIR e2e/local/down.sh"
  else
    "$here/down.sh" || true
    echo "teardown took $((SECONDS - started))s"
  fi
  exit "$rc"
}
trap cleanup EXIT

step "Upstream binaries (kube $(grep -o 'KUBERNETES_VERSION="[^"]*' "$here/binaries.sh" | cut -d'"' -f2), etcd, kwok)"
eval "$("$here/binaries.sh")"

step "Operator, plugin and scenarios (the workspace's test build: scripts/workspace-tests.sh)"
tests="$repo/scripts/workspace-tests.sh"
# A private copy right after the build: a concurrent build in the same target directory cannot
# swap it mid-run.
operator_copy=$(mktemp /tmp/tusk-operator.XXXXXX)
install -m 0755 "$("$tests" bin tusk)" "$operator_copy"
# The plugin the kubectl_tusk_* scenarios run (e2e/tests/plugin.rs), copied for the same reason.
plugin_copy=$(mktemp /tmp/kubectl-tusk.XXXXXX)
install -m 0755 "$("$tests" bin kubectl-tusk)" "$plugin_copy"
summary_bin=$("$tests" bin tusk-e2e-summary)

step "Control plane in $TUSK_E2E_DIR"
eval "$("$here/up.sh")"
mv "$operator_copy" "$TUSK_E2E_DIR/tusk"
mv "$plugin_copy" "$TUSK_E2E_DIR/kubectl-tusk"
export TUSK_KUBECTL_TUSK_BIN="$TUSK_E2E_DIR/kubectl-tusk"

step "Operator (deploy/ applied server-side; the binary runs with the tusk-operator ServiceAccount's token)"
"$here/operator.sh" install
"$here/operator.sh" start

if [[ "${TUSK_E2E_L4:-0}" == 1 ]]; then
  step "L4: MinIO, a real PostgreSQL per database pod, Jobs run with the real backup-agent"
  # Assigned first, so that a failure stops the run (`eval "$(…)"` would hide it).
  l4_env=$("$here/l4.sh" up)
  eval "$l4_env"
fi

step "Scenarios (the tusk-e2e package's tests with --ignored)"
rc=0
# One scenario at a time: some kill the operator, read its gauges or count every write it makes.
filters=(--test-threads=1 --nocapture)
if (($#)); then filters+=(--exact "$@"); fi
export E2E_SUMMARY="$TUSK_E2E_DIR/summary"
: >"$E2E_SUMMARY"
# The levels this run offers: a scenario needing one of them must use it (a skip fails it);
# one needing another (real pods, the node, a benchmark) reports SKIP with the level.
E2E_LEVELS=own-control-plane,operator-process
if [[ "${TUSK_E2E_L4:-0}" == 1 ]]; then E2E_LEVELS+=,l4; fi
export E2E_LEVELS
"$tests" each tusk-e2e -- --ignored "${filters[@]}" || rc=$?
echo
echo "=== scenarios (levels of this run: $E2E_LEVELS)"
cat "$E2E_SUMMARY"
# Every scenario the run was to run must have reported: one that ran nothing fails the run.
listed="$TUSK_E2E_DIR/listed"
"$tests" each tusk-e2e -- --ignored --list "${filters[@]}" >"$listed"
"$summary_bin" "$listed" "$E2E_SUMMARY" || rc=1
# scripts/e2e.sh reads which scenarios need real pods from it (the SKIP[pods] lines).
if [[ -n "${E2E_SUMMARY_OUT:-}" ]]; then cp "$E2E_SUMMARY" "$E2E_SUMMARY_OUT"; fi

step "e2e/kind on this API server (shellcheck, server dry run, up.sh with docker/kind stubbed)"
"$repo/e2e/kind/check.sh" --smoke || rc=1
step ""
echo
echo "=== timings"
printf '%s\n' "${timings[@]}"
exit "$rc"
