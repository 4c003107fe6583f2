#!/usr/bin/env bash
# The end-to-end suite CI runs after scripts/test.sh: shellcheck on every shell script, then the
# scenarios of the tusk-e2e crate (e2e/tests/) against a local control plane (e2e/local/run.sh:
# upstream kube-apiserver, controller-manager, scheduler, etcd and kwok built with Go into
# ~/.cache/tusk-testbin; the operator built from this tree). No Docker needed.
# Usage: scripts/e2e.sh [SCENARIO...]
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
started=$SECONDS

step "shellcheck (pinned: scripts/testbin.sh)"
# The pinned version, not whichever is on PATH: another version gives another verdict.
eval "$(scripts/testbin.sh shellcheck)"
mapfile -t scripts < <(git ls-files '*.sh' .ci/run)
"$TUSK_SHELLCHECK_BIN" --version | sed -n 2p
"$TUSK_SHELLCHECK_BIN" -x "${scripts[@]}"
echo "${#scripts[@]} scripts clean"

step "L4 job runner unit tests (e2e/local/test_jobrunner.py)"
python3 -B -m unittest discover -s e2e/local -p 'test_*.py'

step "e2e scenarios on a local control plane"
# L4 on by default: real PostgreSQL and MinIO (installed by scripts/test.sh) and the real agent
# running the operator's backup/restore Jobs (e2e/local/l4.sh). TUSK_E2E_L4=0 leaves it out.
# Its summary says which scenarios need real pods (SKIP[pods], SKIP[node]): the node runs those.
kwok_summary=$(mktemp)
trap 'rm -f "$kwok_summary"' EXIT
E2E_SUMMARY_OUT=$kwok_summary TUSK_E2E_L4="${TUSK_E2E_L4:-1}" e2e/local/run.sh "$@"

step "scale benchmark, short (scripts/bench-scale.sh: 40 clusters, the test build)"
# Proves the benchmark runs end to end; its figures are printed, never asserted (speed goals are
# not timed tests). The full run: scripts/bench-scale.sh (README, Performance).
TUSK_SCALE_PROFILE=debug scripts/bench-scale.sh --rest 15 40

# Real pods (e2e/local/node-run.sh): a kubelet and containerd, our images from the Dockerfile
# with the binaries this run has just compiled (TUSK_IMAGE_BINARIES=host: minutes, cold or
# warm), and every scenario the local run left out for needing real pods or the node
# (TUSK_E2E_NODE_SCENARIOS=pods, the default; =all: every scenario there; or names). Each must
# pass: a skip, a rename or a scenario that ran nothing fails the run. TUSK_E2E_NODE=1 always,
# =0 never; by default (auto) whenever this machine can (root: CI is); not root, the stage is
# left out with a line saying so, and the real-pod scenarios did not run.
node=${TUSK_E2E_NODE:-auto}
if [[ "$node" == auto ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    node=0
    echo "real-node suite left out: not root (the scenarios needing real pods did not run)"
  else
    node=1
  fi
fi
if [[ "$node" == 1 ]]; then
  step "e2e on a real node (e2e/local/node-run.sh)"
  case "${TUSK_E2E_NODE_SCENARIOS:-pods}" in
    all) named=() ;;
    pods)
      mapfile -t named < <(awk '$1 == "SKIP[pods]" || $1 == "SKIP[node]" { print $3 }' "$kwok_summary")
      # Passes locally in a reduced form and runs its whole form where pods are real.
      named+=(ca_rotation_reaches_every_ca_crt_step_by_step_without_a_rollout) ;;
    *) read -ra named <<<"$TUSK_E2E_NODE_SCENARIOS" ;;
  esac
  if [[ "${TUSK_E2E_NODE_SCENARIOS:-pods}" != all ]] && ((${#named[@]} == 0)); then
    echo "no scenario of the local run needs real pods: nothing for the node to run"
  else
    echo "on the real node: ${#named[@]} scenario(s)${named[*]:+: ${named[*]}}"
    e2e/local/node-run.sh "${named[@]}"
  fi
fi

echo
echo "e2e passed in $((SECONDS - started))s."
if [[ -n "${TUSK_CI_STARTED:-}" ]]; then
  echo "CI run so far: $(( ($(date +%s) - TUSK_CI_STARTED) / 60 )) min (limit 90)."
fi
