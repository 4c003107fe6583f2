#!/usr/bin/env bash
# L4 of the local e2e environment: real bytes on top of the kwok control plane of up.sh.
# Starts MinIO (storage.sh) and the job runner (jobrunner.py), which gives every Tusk database
# pod a real local PostgreSQL and runs every Job pod's container with the real backup-agent.
#
#   eval "$(e2e/local/up.sh)"            # the control plane (kwok: pods never run by themselves)
#   eval "$(e2e/local/l4.sh up)"         # + MinIO and the job runner; prints export lines
#                                        # (also TUSK_FAKE_GCS_BIN, for the GCS scenarios)
#   e2e/local/l4.sh down                 # stops the job runner, its PostgreSQL servers, MinIO
#                                        # (e2e/local/down.sh calls this too)
# TUSK_AGENT_BIN: the backup-agent to run; default: the workspace's test build of it. Logs: $TUSK_E2E_DIR/l4/ (jobrunner.log, pods/, pg/, results.jsonl).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
DIR="${TUSK_E2E_DIR:-/tmp/tusk-e2e}"
L4="$DIR/l4"
log() { echo "l4.sh: $*" >&2; }
# shellcheck source=e2e/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
running() { [[ -f "$L4/jobrunner.pid" ]] && kill -0 "$(cat "$L4/jobrunner.pid")" 2>/dev/null; }

up() {
  mkdir -p "$L4"
  if [[ -z "${TUSK_AGENT_BIN:-}" ]]; then
    # From the workspace's test build, as the operator and the scenarios: another package
    # selection would compile the agent's TLS and SDK dependencies again (over a minute here).
    log "backup-agent from the workspace's test build (scripts/workspace-tests.sh)"
    TUSK_AGENT_BIN=$("$repo/scripts/workspace-tests.sh" bin backup-agent)
  fi
  [[ -x "$TUSK_AGENT_BIN" ]] || { log "TUSK_AGENT_BIN=$TUSK_AGENT_BIN is not an executable"; exit 1; }
  # A copy, so that a concurrent cargo build cannot swap the binary under a running test.
  if [[ "$TUSK_AGENT_BIN" != "$L4/backup-agent" ]]; then
    cp "$TUSK_AGENT_BIN" "$L4/backup-agent.tmp" && mv "$L4/backup-agent.tmp" "$L4/backup-agent"
    log "backup-agent: a copy of $TUSK_AGENT_BIN"
    TUSK_AGENT_BIN="$L4/backup-agent"
  fi
  if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && [[ -z "${TUSK_PG_BIN_DIR:-}" ]]; then
    log "no PostgreSQL server: apt-get install -y postgresql (or set TUSK_PG_BIN_DIR)"
    exit 1
  fi
  # MinIO for storage.sh, fake-gcs-server for the GCS scenarios (they start it themselves).
  local testbin_env minio_env
  testbin_env=$("$repo/scripts/testbin.sh")
  eval "$testbin_env"
  minio_env=$(TUSK_MINIO_BIN="$TUSK_MINIO_BIN" "$here/storage.sh" up)
  eval "$minio_env"
  if running; then
    log "job runner already running (pid $(cat "$L4/jobrunner.pid"))"
  else
    TUSK_AGENT_BIN="$TUSK_AGENT_BIN" TUSK_E2E_MINIO_ENDPOINT="$TUSK_E2E_MINIO_ENDPOINT" TUSK_E2E_DIR="$DIR" \
      nohup python3 -u "$here/jobrunner.py" run >>"$L4/jobrunner.log" 2>&1 &
    echo $! >"$L4/jobrunner.pid"
    sleep 0.5
    running || { log "job runner exited:"; tail -20 "$L4/jobrunner.log" >&2; exit 1; }
    log "job runner pid $(cat "$L4/jobrunner.pid"), agent $TUSK_AGENT_BIN, log $L4/jobrunner.log"
  fi
  echo "$minio_env"
  echo "$testbin_env"
  echo "export TUSK_AGENT_BIN=$TUSK_AGENT_BIN"
}

down() {
  if running; then
    local pid
    pid=$(cat "$L4/jobrunner.pid")
    stop_pid "$pid"
    log "job runner stopped (pid $pid)"
  fi
  rm -f "$L4/jobrunner.pid"
  if [[ -f "$L4/databases.json" ]]; then TUSK_E2E_DIR="$DIR" python3 "$here/jobrunner.py" down >&2; fi
  "$here/storage.sh" down
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
