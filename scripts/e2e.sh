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
TUSK_E2E_L4="${TUSK_E2E_L4:-1}" e2e/local/run.sh "$@"

step "scale benchmark, short (scripts/bench-scale.sh: 100 clusters, debug build)"
# Proves the benchmark runs end to end; its figures are printed, never asserted (speed goals are
# not timed tests). The full run: scripts/bench-scale.sh (README, Performance).
TUSK_SCALE_PROFILE=debug scripts/bench-scale.sh --rest 30 100

# Real pods (e2e/local/node-run.sh): a kubelet and containerd, our images from the Dockerfile
# with the binaries this run has just compiled (TUSK_IMAGE_BINARIES=host: minutes, cold or
# warm), the scenarios on the node platform. TUSK_E2E_NODE=1 always, =0 never; by default
# (auto) when this machine can (root) and the run so far leaves room in CI's 90 minutes. The
# scenarios: those whose behaviour is in the pods and the network (the short version; the
# wire, certificate rotation under load, physical backups and the archive, the archive through
# the HA faults, a point-in-time restore and the total loss), or every one with
# TUSK_E2E_NODE_SCENARIOS=all. Each named scenario must pass: a skip or a rename fails the run.
node=${TUSK_E2E_NODE:-auto}
if [[ "$node" == auto ]]; then
  elapsed=$(( $(date +%s) - ${TUSK_CI_STARTED:-$(date +%s)} ))
  if [[ $(id -u) -ne 0 ]]; then
    node=0; why="not root"
  elif ((elapsed > 50 * 60)); then
    node=0; why="$((elapsed / 60)) min used already; the short node suite needs up to 35"
  else
    node=1
  fi
  ((node)) || echo "real-node suite skipped: $why"
fi
if [[ "$node" == 1 ]]; then
  step "e2e on a real node (e2e/local/node-run.sh)"
  short=(tls_verify_full_through_every_service_and_pod_name
    tls_wire_carries_no_plaintext_before_or_after_a_switchover
    ca_rotation_reaches_every_ca_crt_step_by_step_without_a_rollout
    physical_backup_verified_and_archive_continuity_on_real_pods
    archive_stays_whole_through_the_ha_faults
    point_in_time_restores_on_real_pods_by_time_and_after_total_loss)
  if [[ "${TUSK_E2E_NODE_SCENARIOS:-short}" == all ]]; then
    e2e/local/node-run.sh
  elif [[ "${TUSK_E2E_NODE_SCENARIOS:-short}" == short ]]; then
    e2e/local/node-run.sh "${short[@]}"
  else
    read -ra named <<<"$TUSK_E2E_NODE_SCENARIOS"
    e2e/local/node-run.sh "${named[@]}"
  fi
fi

echo
echo "e2e passed in $((SECONDS - started))s."
