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

# free_loopback PORT: a loopback address 127.x.y.z whose PORT is free, chosen at random so that
# parallel runs (and an address reserved long before it is bound) do not collide.
free_loopback() {
  python3 - "$1" <<'PY'
import random, socket, sys
port = int(sys.argv[1])
for _ in range(200):
    addr = f"127.{random.randint(64, 250)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
    with socket.socket() as s:
        try:
            s.bind((addr, port))
        except OSError:
            continue
    print(addr)
    break
else:
    raise SystemExit(f"no loopback address with a free port {port}")
PY
}
