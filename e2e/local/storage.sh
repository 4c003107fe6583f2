#!/usr/bin/env bash
# The object store of the local L4 e2e: upstream MinIO (built by scripts/testbin.sh) on port 9000
# of a free loopback address (127.x.y.z), whose in-cluster names e2e/local/incluster.sh resolves
# for the processes it runs (the operator), root credentials minioadmin/minioadmin (what
# samples/postgresql-s3-minio.yaml puts in its Secret), and the bucket `tusk-backups` the samples
# write to.
#
#   e2e/local/storage.sh up     # start (idempotent); prints `export TUSK_E2E_MINIO_ENDPOINT=...`
#   e2e/local/storage.sh env    # prints the export line of the running MinIO
#   e2e/local/storage.sh down   # stop it (only the PID this script started) and drop its data
#
# State lives in ${TUSK_E2E_DIR:-/tmp/tusk-e2e}/minio/. The bucket is created with curl's
# built-in SigV4 signing (curl >= 7.75), so nothing else needs installing.
set -euo pipefail

E2E_DIR="${TUSK_E2E_DIR:-/tmp/tusk-e2e}"
DIR="$E2E_DIR/minio"
BUCKET="${TUSK_E2E_BUCKET:-tusk-backups}"
USER_KEY=minioadmin
SECRET_KEY=minioadmin
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

log() { echo "storage.sh: $*" >&2; }
# shellcheck source=e2e/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A loopback address (127.0.0.0/8) whose port 9000 is free: MinIO keeps the in-cluster port, so
# `http://minio.minio.svc.cluster.local:9000` only needs a name, not a port, rewritten
# (e2e/local/incluster.sh), and parallel runs each get their own address.
free_loopback_9000() {
  python3 - <<'PY'
import random, socket
for _ in range(200):
    addr = f"127.{random.randint(64, 250)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
    with socket.socket() as s:
        try:
            s.bind((addr, 9000))
        except OSError:
            continue
    print(addr)
    break
else:
    raise SystemExit("storage.sh: no loopback address with a free port 9000")
PY
}

# set_hosts [ADDR]: the in-cluster names of MinIO in $E2E_DIR/hosts (see incluster.sh), rewritten
# in place (a bind mount of it follows the inode); without ADDR, the entries are removed.
HOSTS_TAG="# tusk-e2e storage.sh"
set_hosts() {
  local hosts="$E2E_DIR/hosts" content
  [[ -f "$hosts" ]] || cp /etc/hosts "$hosts"
  content=$(grep -vF "$HOSTS_TAG" "$hosts" || true)
  if (($#)); then content+=$'\n'"$1 minio.minio.svc.cluster.local minio.minio.svc minio.minio $HOSTS_TAG"; fi
  printf '%s\n' "$content" >"$hosts"
}

running() { [[ -f "$DIR/pid" ]] && kill -0 "$(cat "$DIR/pid")" 2>/dev/null; }

print_env() { echo "export TUSK_E2E_MINIO_ENDPOINT=$(cat "$DIR/endpoint")"; }

# s3 METHOD PATH [curl args...]: one signed request to the local MinIO.
s3() {
  local method=$1 path=$2
  shift 2
  curl -sS --fail-with-body -X "$method" --user "$USER_KEY:$SECRET_KEY" \
    --aws-sigv4 "aws:amz:us-east-1:s3" "$(cat "$DIR/endpoint")$path" "$@"
}

make_bucket() { s3 PUT "/$BUCKET" -o /dev/null || s3 GET "/$BUCKET?location" -o /dev/null; }

up() {
  if running; then
    log "MinIO already running (pid $(cat "$DIR/pid"))"
    print_env
    return
  fi
  local bin="${TUSK_MINIO_BIN:-}"
  if [[ -z "$bin" ]]; then
    eval "$("$REPO/scripts/testbin.sh")"
    bin="$TUSK_MINIO_BIN"
  fi
  rm -rf "$DIR" && mkdir -p "$DIR/data"
  local addr console
  addr=$(free_loopback_9000)
  console=$(free_port)
  echo "http://$addr:9000" >"$DIR/endpoint"
  MINIO_ROOT_USER=$USER_KEY MINIO_ROOT_PASSWORD=$SECRET_KEY MINIO_BROWSER=off \
    MINIO_UPDATE=off CI=true \
    nohup "$bin" server "$DIR/data" --address "$addr:9000" --console-address "127.0.0.1:$console" \
    >"$DIR/minio.log" 2>&1 &
  echo $! >"$DIR/pid"
  local i
  for ((i = 0; i < 300; i++)); do
    if curl -sf "http://$addr:9000/minio/health/ready" >/dev/null 2>&1; then break; fi
    running || { log "MinIO exited:"; tail -20 "$DIR/minio.log" >&2; exit 1; }
    sleep 0.1
  done
  ((i < 300)) || { log "MinIO not ready after 30 s:"; tail -20 "$DIR/minio.log" >&2; exit 1; }
  # Ready is not always serving yet on a loaded machine (503): retry until the bucket exists.
  wait_for "bucket $BUCKET" 30 make_bucket
  set_hosts "$addr"
  log "MinIO $(cat "$DIR/endpoint") (pid $(cat "$DIR/pid")), bucket $BUCKET, log $DIR/minio.log"
  print_env
}

down() {
  if running; then
    local pid
    pid=$(cat "$DIR/pid")
    stop_pid "$pid"
    log "MinIO stopped (pid $pid)"
  fi
  rm -rf "$DIR"
  if [[ -f "$E2E_DIR/hosts" ]]; then set_hosts; fi
}

# ls PREFIX: keys under PREFIX in the bucket, one a line (for scenarios and debugging).
list() {
  local prefix
  prefix=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "${1:-}")
  s3 GET "/$BUCKET?list-type=2&prefix=$prefix" |
    python3 -c 'import re,sys; [print(k) for k in re.findall(r"<Key>([^<]*)</Key>", sys.stdin.read())]'
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) running || { log "MinIO is not running"; exit 1; }; print_env ;;
  ls) running || { log "MinIO is not running"; exit 1; }; list "${2:-}" ;;
  get) running || { log "MinIO is not running"; exit 1; }; s3 GET "/$BUCKET/${2:?key}" ;;
  *) echo "usage: $0 up|down|env|ls [PREFIX]|get KEY" >&2; exit 2 ;;
esac
