#!/usr/bin/env bash
# Runs a peer operator of the scale benchmark (scripts/bench-scale.sh) as a local process against
# the e2e/local control plane, as e2e/local/operator.sh runs Tusk: with a token of its own
# ServiceAccount bound to the RBAC it ships, so that it has exactly its own permissions. Its
# CRDs and RBAC come from its module in the Go module cache (scripts/testbin.sh exports
# TUSK_<PEER>_BIN and TUSK_<PEER>_MODULE). It writes the files operator.sh writes (pids/operator.pid,
# logs/operator.log, operator.port: its metrics port, if it has one), which tusk-scale reads.
# Usage: e2e/local/peer.sh cnpg|zalando install|start|kill|stop
set -euo pipefail
DIR="${TUSK_E2E_DIR:-/tmp/tusk-e2e}"
[[ -f "$DIR/env" ]] || { echo "peer.sh: no control plane in $DIR (run e2e/local/up.sh)" >&2; exit 1; }
# shellcheck disable=SC1091
source "$DIR/env"
# shellcheck source=e2e/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
peer=${1:-}
pidfile="$DIR/pids/operator.pid"
logfile="$DIR/logs/operator.log"
log() { echo "peer.sh ($peer): $*" >&2; }
running() { [[ -f "$pidfile" ]] && kill -0 "$(<"$pidfile")" 2>/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# CloudNativePG: namespace cnpg-system, ServiceAccount cnpg-manager (the names its
# config/rbac/role_binding.yaml binds), every CRD of config/crd/bases. Its admission webhooks
# run, pointed at the process on loopback: the API server runs on this host, so a URL
# https://127.0.0.1:PORT/... reaches it without a Service. The serving certificate is made here
# with openssl and handed over in WEBHOOK_CERT_DIR, the operator's mode for certificates it does
# not manage (OLM's): otherwise it would write its own to /run/secrets/cnpg.io/webhook and need
# a Service of its Deployment's pods to inject the CA into.
cnpg_install() {
  local module=${TUSK_CNPG_MODULE:?run scripts/testbin.sh cnpg}
  kubectl create namespace cnpg-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n cnpg-system create serviceaccount cnpg-manager --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl apply --server-side -f "$module/config/crd/bases" >/dev/null
  kubectl apply --server-side -f "$module/config/rbac/role.yaml" -f "$module/config/rbac/role_binding.yaml" >/dev/null
  kubectl wait --for=condition=Established --timeout=60s crd/clusters.postgresql.cnpg.io >/dev/null
  local certs="$DIR/cnpg-webhook" port
  mkdir -p "$certs"
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=cnpg-webhook-ca" \
    -keyout "$certs/ca.key" -out "$certs/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$certs/apiserver.key" \
    -out "$certs/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$certs/ext"
  openssl x509 -req -in "$certs/apiserver.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" \
    -CAcreateserial -days 7 -extfile "$certs/ext" -out "$certs/apiserver.crt" 2>/dev/null
  port=$(free_port)
  echo "$port" >"$DIR/peer-webhook.port"
  free_port >"$DIR/operator.port"
  # The shipped webhook configurations, each service reference turned into the loopback URL.
  kubectl create --dry-run=client -o json -f "$module/config/webhook/manifests.yaml" |
    python3 -c '
import base64, json, sys
port, ca = sys.argv[1], base64.b64encode(open(sys.argv[2], "rb").read()).decode()
text, docs, at = sys.stdin.read(), [], 0
while text[at:].strip():  # kubectl prints one JSON document per object
    doc, end = json.JSONDecoder().raw_decode(text[at:].lstrip())
    at += len(text[at:]) - len(text[at:].lstrip()) + end
    docs.append(doc)
for item in docs:
    item["metadata"]["name"] = "cnpg-" + item["metadata"]["name"]
    for hook in item["webhooks"]:
        path = hook["clientConfig"].pop("service")["path"]
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))' "$port" "$certs/ca.crt" | kubectl apply --server-side -f - >/dev/null
  token_kubeconfig "$DIR/peer.kubeconfig" cnpg-system cnpg-manager
  log "CRDs, RBAC and webhooks (https://127.0.0.1:$port) applied; ServiceAccount cnpg-system/cnpg-manager"
}

# Leader election is off (its default; the shipped Deployment turns it on): one process here,
# and a SIGKILLed leader's Lease would add its 15 s duration to the restart being measured.
cnpg_start() {
  local port wport root="$DIR/cnpg-root" bin=${TUSK_CNPG_BIN:?run scripts/testbin.sh cnpg}
  port=$(<"$DIR/operator.port")
  wport=$(<"$DIR/peer-webhook.port")
  # It runs from its image's root, where operator/manager_<arch> are the instance managers it
  # copies into the pods (and hashes): without one for the node's architecture every cluster
  # fails with "invalid architecture: amd64". This host's is the binary itself.
  mkdir -p "$root/operator"
  ln -sf "$bin" "$root/operator/manager_$(go env GOARCH)"
  cd "$root"
  KUBECONFIG="$DIR/peer.kubeconfig" OPERATOR_NAMESPACE=cnpg-system WEBHOOK_CERT_DIR="$DIR/cnpg-webhook" \
    nohup "$bin" controller \
    --metrics-bind-address "127.0.0.1:$port" --webhook-port "$wport" >>"$logfile" 2>&1 &
  echo $! >"$pidfile"
  wait_for "CloudNativePG's webhook /readyz on 127.0.0.1:$wport" 120 \
    curl -fsk --max-time 2 "https://127.0.0.1:$wport/readyz"
}

# Zalando: its manifests/ RBAC (ServiceAccount default/postgres-operator), its postgresql CRD,
# and its shipped ConfigMap (manifests/configmap.yaml, what its Deployment reads) with three
# changes, each because of this machine, not to favour it:
# - api_port: a free port (its HTTP API would take 8080 on the host; in a pod that is its own);
# - debug_logging false: the info level, as Tusk and CloudNativePG run;
# - enable_database_access false: no PostgreSQL runs on kwok, so its SQL (creating roles and
#   databases) would only wait for connection timeouts.
zalando_install() {
  local module=${TUSK_ZALANDO_MODULE:?run scripts/testbin.sh zalando}
  kubectl apply --server-side -f "$module/manifests/operator-service-account-rbac.yaml" \
    -f "$module/manifests/postgresql.crd.yaml" >/dev/null
  kubectl wait --for=condition=Established --timeout=60s crd/postgresqls.acid.zalan.do >/dev/null
  kubectl apply --server-side -f "$module/manifests/configmap.yaml" >/dev/null
  local port
  port=$(free_port)
  kubectl patch configmap postgres-operator --type merge -p \
    "{\"data\": {\"api_port\": \"$port\", \"debug_logging\": \"false\", \"enable_database_access\": \"false\"}}" >/dev/null
  echo "$port" >"$DIR/operator.port"
  token_kubeconfig "$DIR/peer.kubeconfig" default postgres-operator
  log "CRD, RBAC and ConfigMap applied; ServiceAccount default/postgres-operator"
}

zalando_start() {
  local port
  port=$(<"$DIR/operator.port")
  CONFIG_MAP_NAME=default/postgres-operator OPERATOR_NAMESPACE=default \
    nohup "${TUSK_ZALANDO_BIN:?run scripts/testbin.sh zalando}" \
    -kubeconfig "$DIR/peer.kubeconfig" -outofcluster >>"$logfile" 2>&1 &
  echo $! >"$pidfile"
  # Its API answers once its controller runs.
  wait_for "Zalando's API on 127.0.0.1:$port" 120 curl -fs --max-time 2 "http://127.0.0.1:$port/clusters/"
}

stop() { stop_pidfile "$pidfile" "$1" 60; }

case "$peer:${2:-}" in
  cnpg:install | zalando:install) "${peer}_install" ;;
  cnpg:start | zalando:start)
    running && { log "already running (pid $(<"$pidfile"))"; exit 0; }
    "${peer}_start"
    log "started (pid $(<"$pidfile"))" ;;
  cnpg:kill | zalando:kill) stop KILL ;;
  cnpg:stop | zalando:stop) stop TERM ;;
  *) echo "usage: $0 cnpg|zalando install|start|kill|stop" >&2; exit 2 ;;
esac
