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

# token_kubeconfig FILE NAMESPACE SERVICEACCOUNT: a kubeconfig in FILE for the current cluster
# with a token of that ServiceAccount, so that a process run with it has exactly its RBAC.
token_kubeconfig() {
  local file=$1 namespace=$2 account=$3 token server ca
  token=$(kubectl -n "$namespace" create token "$account" --duration=24h)
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  ca=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
  cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: tusk-e2e
  cluster: {server: "$server", certificate-authority: "$ca"}
users:
- name: $account
  user: {token: "$token"}
contexts:
- name: $account
  context: {cluster: tusk-e2e, user: $account}
current-context: $account
KC
}

# stop_pidfile FILE SIGNAL TIMEOUT: send SIGNAL to the process whose pid FILE holds, wait up to
# TIMEOUT seconds for it to exit, and remove FILE (nothing to do if it is not running).
stop_pidfile() {
  local file=$1 signal=$2 timeout=$3 pid
  if [[ -f "$file" ]] && kill -0 "$(<"$file")" 2>/dev/null; then
    pid=$(<"$file")
    kill "-$signal" "$pid"
    wait_for "pid $pid to exit" "$timeout" bash -c "! kill -0 $pid"
  fi
  rm -f "$file"
}
