# shellcheck shell=bash
# Helpers shared by the e2e/local scripts. The sourcing script defines log().

# wait_for WHAT TIMEOUT COMMAND...: poll COMMAND until it succeeds, or fail naming WHAT.
wait_for() {
  local what=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then log "timed out after ${timeout}s waiting for $what"; return 1; fi
    sleep 0.2
  done
}

# stop_pid PID: SIGTERM, up to 5 s to exit, then SIGKILL.
stop_pid() {
  local pid=$1
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}
