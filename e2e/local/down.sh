#!/usr/bin/env bash
# Stops exactly the processes e2e/local/up.sh (and e2e/local/operator.sh) started, from their
# pid files, and removes the run directory.
# Usage: e2e/local/down.sh [--keep-dir]
set -euo pipefail
DIR="${TUSK_E2E_DIR:-/tmp/tusk-e2e}"
keep_dir=0
[[ "${1:-}" == "--keep-dir" ]] && keep_dir=1

# L4 (e2e/local/l4.sh): the job runner, its PostgreSQL servers and MinIO, while the apiserver is up.
if [[ -d "$DIR/l4" && -x "$(dirname "$0")/l4.sh" ]]; then
  TUSK_E2E_DIR="$DIR" "$(dirname "$0")/l4.sh" down || true
fi
# A real node (e2e/local/node.sh): its pods, processes, iptables rules and bridge first.
if [[ -d "$DIR/node" && -x "$(dirname "$0")/node.sh" ]]; then
  TUSK_E2E_DIR="$DIR" "$(dirname "$0")/node.sh" down || true
fi
# The hostPath provisioner's directories (/tmp/hostpath_pv/<uid>) of volumes still present.
if [[ -f "$DIR/env" && -f "$DIR/pids/kube-apiserver.pid" ]]; then
  # shellcheck disable=SC1091
  paths=$(source "$DIR/env" && kubectl get pv --request-timeout=5s \
    -o jsonpath='{range .items[*]}{.spec.hostPath.path}{"\n"}{end}' 2>/dev/null) || true
  for p in $paths; do [[ "$p" == /tmp/hostpath_pv/* ]] && rm -rf "$p"; done
fi
if [[ -d "$DIR/pids" ]]; then
  # SIGTERM to all at once (the operator and kwok first), then SIGKILL what is left after 5 s:
  # everything here is throwaway, etcd's data included.
  pids=()
  for name in operator kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    pidfile="$DIR/pids/$name.pid"
    [[ -f "$pidfile" ]] || continue
    pid=$(<"$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$pidfile"
  done
  for _ in $(seq 1 50); do
    alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    ((${#alive[@]})) || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
fi
if ((!keep_dir)) && [[ -f "$DIR/.tusk-e2e" ]]; then
  rm -rf "$DIR"
fi
if ((keep_dir)); then echo "down.sh: stopped; kept $DIR" >&2; else echo "down.sh: stopped; removed $DIR" >&2; fi
