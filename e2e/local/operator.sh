#!/usr/bin/env bash
# Runs the operator under test as a local process against the e2e/local control plane, with a
# kubeconfig holding a token of its own ServiceAccount (from deploy/), so that a missing RBAC
# rule fails the run exactly as it would in a cluster.
# Usage: e2e/local/operator.sh install|start|kill|stop|logs|metrics
#   install  server-side apply deploy/ (CRDs, RBAC, ...) without the operator Deployment's pods
#   start    start the binary ($TUSK_OPERATOR_BIN, default: the one copied by install)
#   kill     SIGKILL it (a crash), stop  SIGTERM it and wait
#   logs     print its log, metrics  print its /metrics
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
DIR="${TUSK_E2E_DIR:-/tmp/tusk-e2e}"
[[ -f "$DIR/env" ]] || { echo "operator.sh: no control plane in $DIR (run e2e/local/up.sh)" >&2; exit 1; }
# shellcheck disable=SC1091
source "$DIR/env"
pidfile="$DIR/pids/operator.pid"
logfile="$DIR/logs/operator.log"

log() { echo "operator.sh: $*" >&2; }
running() { [[ -f "$pidfile" ]] && kill -0 "$(<"$pidfile")" 2>/dev/null; }
# shellcheck source=e2e/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

install() {
  # The first install of the CRDs and deploy/ on a fresh API server: what a user sees. A warning
  # (an unrecognised format in a CRD, a deprecated field) fails it; a later apply of the same
  # objects would not show it again.
  kubectl apply --server-side -k "$repo/deploy" >/dev/null 2>"$DIR/logs/install.err" \
    || { cat "$DIR/logs/install.err" >&2; exit 1; }
  if grep -i 'warning' "$DIR/logs/install.err" >&2; then
    log "installing deploy/ drew the warnings above from the API server"
    exit 1
  fi
  # The operator runs as a local process here, not as the Deployment's pod.
  kubectl -n tusk-system scale deployment tusk-operator --replicas=0 >/dev/null
  kubectl wait --for=condition=Established --timeout=60s crd/postgresqls.tusk.dev crd/backups.tusk.dev >/dev/null
  token_kubeconfig "$DIR/operator.kubeconfig" tusk-system tusk-operator
  # The port of /metrics, chosen once so that restarts keep it.
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' >"$DIR/operator.port"
  # Where this operator reaches GCS (TUSK_GCS_ENDPOINT; jobrunner.py gives the agents the same):
  # an address reserved for the GCS scenarios, which serve their emulator there
  # (e2e/tests/gcs_lifecycle.rs). Chosen once, since the operator reads it at start.
  echo "http://$(free_loopback 4443):4443" >"$DIR/gcs.endpoint"
  log "deploy/ applied (Deployment scaled to 0); the operator will use ServiceAccount tusk-system/tusk-operator"
}

start() {
  running && { log "already running (pid $(<"$pidfile"))"; return 0; }
  local bin="${TUSK_OPERATOR_BIN:-$DIR/tusk}" port
  [[ -x "$bin" ]] || { log "no operator binary at $bin (set TUSK_OPERATOR_BIN)"; exit 1; }
  port=$(<"$DIR/operator.port")
  # Only when install chose one: an empty TUSK_GCS_ENDPOINT would not mean "real GCS".
  if [[ -f "$DIR/gcs.endpoint" ]]; then export TUSK_GCS_ENDPOINT; TUSK_GCS_ENDPOINT=$(<"$DIR/gcs.endpoint"); fi
  # A stable identity: a restarted process takes its own Lease back at once. incluster.sh makes
  # in-cluster names (the MinIO of e2e/local/l4.sh) resolve as they would in a pod.
  KUBECONFIG="$DIR/operator.kubeconfig" POD_NAME=tusk-e2e-local POD_NAMESPACE=tusk-system \
    RUST_LOG="${RUST_LOG:-info}" nohup "$here/incluster.sh" "$bin" run --listen "127.0.0.1:$port" --log-format text \
    >>"$logfile" 2>&1 &
  echo $! >"$pidfile"
  wait_for "the operator's /readyz on 127.0.0.1:$port" 60 curl -fs --max-time 2 "http://127.0.0.1:$port/readyz"
  log "started (pid $(<"$pidfile")), metrics on http://127.0.0.1:$port/metrics"
}

stop() { stop_pidfile "$pidfile" "$1" 30; }

case "${1:-}" in
  install) install ;;
  start) start ;;
  kill) stop KILL ;;
  stop) stop TERM ;;
  logs) cat "$logfile" 2>/dev/null || true ;;
  metrics) curl -fs --max-time 5 "http://127.0.0.1:$(<"$DIR/operator.port")/metrics" ;;
  *) echo "usage: $0 install|start|kill|stop|logs|metrics" >&2; exit 2 ;;
esac
