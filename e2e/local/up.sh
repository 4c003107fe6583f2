#!/usr/bin/env bash
# Starts a throwaway Kubernetes control plane on loopback, built from upstream programs only:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and kwok for the node and its
# pods (kwok fakes the kubelet: pods become Running/Ready without executing anything).
# Everything lives in ${TUSK_E2E_DIR:-/tmp/tusk-e2e}: PKI, data, logs, pid files, kubeconfigs.
# Usage: eval "$(e2e/local/up.sh)"   # prints `export KUBECONFIG=...` lines; e2e/local/down.sh stops it
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DIR="${TUSK_E2E_DIR:-/tmp/tusk-e2e}"
started=$SECONDS

log() { echo "up.sh: $*" >&2; }

# An earlier environment in $DIR: pid files whose processes are gone (a reboot, a killed session)
# are cleaned up; a live one is replaced only when asked (CI owns its machine: .ci/run sets
# TUSK_E2E_REPLACE=1, after a CI run once failed on a benchmark left running by a session).
if [[ -d "$DIR/pids" ]] && compgen -G "$DIR/pids/*.pid" >/dev/null; then
  # Ours only if its command line names $DIR (etcd's and the apiserver's do): after a reboot a
  # pid may belong to something else, which must not be killed.
  alive=0
  for pidfile in "$DIR"/pids/*.pid; do
    pid=$(<"$pidfile")
    if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$DIR"; then
      alive=1
    fi
  done
  ((alive)) || rm -f "$DIR"/pids/*.pid "$DIR"/node/pids/*.pid
  if ((alive)) && [[ "${TUSK_E2E_REPLACE:-0}" != 1 ]]; then
    log "$DIR already holds a running environment (run e2e/local/down.sh first, or set TUSK_E2E_REPLACE=1)"
    exit 1
  fi
  if ((alive)); then log "TUSK_E2E_REPLACE=1: stopping the environment running in $DIR"; else
    log "$DIR holds a stale environment (its processes are gone): cleaning it up"; fi
  TUSK_E2E_DIR="$DIR" "$here/down.sh" >&2 || true
fi
# Binaries: reuse the caller's exports, else build or reuse the pinned ones.
if [[ -z "${TUSK_KUBE_APISERVER_BIN:-}" || -z "${TUSK_KWOK_STAGES:-}" ]]; then
  eval "$("$here/binaries.sh")"
fi
command -v openssl >/dev/null || { log "openssl not found"; exit 1; }

# Only a directory this script made (marked) or an empty one is ever wiped.
if [[ -d "$DIR" && ! -f "$DIR/.tusk-e2e" && -n "$(ls -A "$DIR")" ]]; then
  log "$DIR exists and is not a tusk e2e directory; choose another TUSK_E2E_DIR"
  exit 1
fi
rm -rf "$DIR" && mkdir -p "$DIR"/{pki,etcd,logs,pids} && touch "$DIR/.tusk-e2e"
DIR=$(cd "$DIR" && pwd)
pki="$DIR/pki"

# On failure, show why and stop what was started.
trap 'rc=$?; if ((rc)); then log "failed; last log lines:"; tail -n 15 "$DIR"/logs/*.log >&2 || true; "$here/down.sh" --keep-dir >&2 || true; fi' EXIT

# free_ports N: N distinct free TCP ports on 127.0.0.1.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}
read -r etcd_port etcd_peer_port api_port kcm_port sched_port kwok_port <<<"$(free_ports 6)"

log "PKI (openssl) in $pki"
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=tusk-e2e-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
# cert NAME SUBJECT [SAN]: a key and a certificate signed by the CA.
cert() {
  local name=$1 subject=$2 san=${3:-}
  openssl_quiet req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$pki/$name.key" -out "$pki/$name.csr"
  local ext="$pki/$name.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n "$san" ]]; then echo "extendedKeyUsage=serverAuth"; echo "subjectAltName=$san"; else echo "extendedKeyUsage=clientAuth"; fi
  } >"$ext"
  openssl_quiet x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 7 -extfile "$ext" -out "$pki/$name.crt"
}
cert apiserver "/CN=kube-apiserver" \
  "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=tusk-e2e-admin"
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

server="https://127.0.0.1:$api_port"
kubeconfig="$DIR/admin.kubeconfig"
cat >"$kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: tusk-e2e
  cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$pki/admin.crt", client-key: "$pki/admin.key"}
contexts:
- name: tusk-e2e
  context: {cluster: tusk-e2e, user: admin, namespace: default}
current-context: tusk-e2e
KC

# OwnerReferencesPermissionEnforcement (off by default, on in some clusters) makes the operator's
# owner references with blockOwnerDeletion need `update` on postgresqls/finalizers, as in deploy/.
# The operator's ServiceAccount is audited at Metadata level so that scenarios can count its
# writes (and the peers' of e2e/local/peer.sh, for scripts/bench-scale.sh); so are the status
# writes of pods and StatefulSets, by whoever (kwok or the kubelet, kube-controller-manager), so
# that the benchmark can tell where a cluster's Ready waited; everything else is not logged. The log is never rotated (kube-apiserver rotates at 100 MB by default, which a
# 10,000-cluster benchmark passes twice, and a byte mark into a rotated file counts nothing).
cat >"$DIR/audit-policy.yaml" <<'AP'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["system:serviceaccount:tusk-system:tusk-operator",
    "system:serviceaccount:cnpg-system:cnpg-manager", "system:serviceaccount:default:postgres-operator"]
- level: Metadata
  verbs: ["update", "patch"]
  resources: [{group: "", resources: ["pods/status"]}, {group: "apps", resources: ["statefulsets/status"]}]
- level: None
AP

# start NAME BINARY ARGS...: run in the background, log to logs/NAME.log, remember the pid.
start() {
  local name=$1; shift
  nohup "$@" >"$DIR/logs/$name.log" 2>&1 &
  echo $! >"$DIR/pids/$name.pid"
}
# shellcheck source=e2e/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
healthy() { curl -fsk --max-time 2 "$1" >/dev/null; }

log "etcd on 127.0.0.1:$etcd_port"
start etcd "$TUSK_ETCD_BIN" --name default --data-dir "$DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster "default=http://127.0.0.1:$etcd_peer_port" --listen-metrics-urls "" \
  --unsafe-no-fsync --quota-backend-bytes 4294967296
wait_for "etcd /health" 60 healthy "http://127.0.0.1:$etcd_port/health"

log "kube-apiserver on $server"
start kube-apiserver "$TUSK_KUBE_APISERVER_BIN" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --endpoint-reconciler-type none \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --kubelet-preferred-address-types InternalIP \
  --authorization-mode Node,RBAC \
  --enable-admission-plugins OwnerReferencesPermissionEnforcement \
  --audit-policy-file "$DIR/audit-policy.yaml" --audit-log-path "$DIR/logs/audit.log" \
  --audit-log-format json --audit-log-mode blocking --audit-log-maxsize 1048576
wait_for "kube-apiserver /readyz" 120 "$TUSK_KUBECTL_BIN" --kubeconfig "$kubeconfig" get --raw /readyz

log "kube-controller-manager, kube-scheduler"
controllers=serviceaccount-controller,serviceaccount-token-controller,namespace-controller
controllers+=,garbage-collector-controller,statefulset-controller,job-controller,cronjob-controller
controllers+=,ttl-after-finished-controller,deployment-controller,replicaset-controller
controllers+=,persistentvolume-binder-controller,persistentvolume-protection-controller
controllers+=,persistentvolumeclaim-protection-controller,root-ca-certificate-publisher-controller
controllers+=,endpointslice-controller,pod-garbage-collector-controller,clusterrole-aggregation-controller
# node-lifecycle removes the not-ready taint that admission puts on a new Node once kwok reports it Ready.
controllers+=,node-lifecycle-controller
start kube-controller-manager "$TUSK_KUBE_CONTROLLER_MANAGER_BIN" \
  --kubeconfig "$kubeconfig" --bind-address 127.0.0.1 --secure-port "$kcm_port" \
  --leader-elect=false --controllers "$controllers" \
  --root-ca-file "$pki/ca.crt" --service-account-private-key-file "$pki/sa.key" \
  --use-service-account-credentials \
  --enable-hostpath-provisioner
start kube-scheduler "$TUSK_KUBE_SCHEDULER_BIN" \
  --kubeconfig "$kubeconfig" --bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false
wait_for "kube-controller-manager /healthz" 60 healthy "https://127.0.0.1:$kcm_port/healthz"
wait_for "kube-scheduler /healthz" 60 healthy "https://127.0.0.1:$sched_port/healthz"

# TUSK_E2E_KWOK=0: no kwok and no fake Node; a real kubelet joins instead (e2e/local/node.sh).
KWOK=${TUSK_E2E_KWOK:-1}
if ((KWOK)); then
log "kwok with stages from $TUSK_KWOK_STAGES and e2e/local/stages.yaml"
stages="$DIR/kwok-stages.yaml"
{
  for s in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$TUSK_KWOK_STAGES/$s"
  done
  echo "---"
  cat "$here/stages.yaml"
} >"$stages"
start kwok "$TUSK_KWOK_BIN" --kubeconfig "$kubeconfig" --config "$stages" \
  --manage-all-nodes=true --node-lease-duration-seconds 40 \
  --server-address "127.0.0.1:$kwok_port" --cidr 10.0.0.0/16
wait_for "kwok /healthz" 60 healthy "http://127.0.0.1:$kwok_port/healthz"
fi

kubectl() { "$TUSK_KUBECTL_BIN" --kubeconfig "$kubeconfig" "$@"; }
if ((KWOK)); then
log "a kwok Node"
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: kwok-node-0
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
status:
  allocatable: {cpu: "64", memory: 256Gi, pods: "250", ephemeral-storage: 1Ti}
  capacity: {cpu: "64", memory: 256Gi, pods: "250", ephemeral-storage: 1Ti}
YAML
kubectl wait --for=condition=Ready node/kwok-node-0 --timeout=60s >/dev/null
fi
log "a default StorageClass provisioned by kube-controller-manager's hostPath provisioner"
kubectl apply -f - >/dev/null <<'YAML'
# PVCs bind at once: kube-controller-manager --enable-hostpath-provisioner creates a hostPath
# PersistentVolume under /tmp/hostpath_pv/ for each claim and deletes it with the claim.
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
YAML
wait_for "ServiceAccount default/default" 60 kubectl get serviceaccount default

cat >"$DIR/env" <<ENV
export KUBECONFIG=$kubeconfig
export PATH=$(dirname "$TUSK_KUBECTL_BIN"):\$PATH
export TUSK_E2E_DIR=$DIR
ENV
log "control plane up in $((SECONDS - started))s (apiserver $server); stop it with e2e/local/down.sh"
trap - EXIT
cat "$DIR/env"
