#!/usr/bin/env bash
# A real node for the local control plane of e2e/local/up.sh (started with TUSK_E2E_KWOK=0):
# containerd (Debian's 1.6, runc, CNI bridge/host-local/loopback/portmap), kubelet and
# kube-proxy v1.37 (binaries.sh) and CoreDNS (cluster.local only), so pods really run.
#
#   e2e/local/node.sh up      # needs $TUSK_E2E_DIR/env from up.sh; state in $TUSK_E2E_DIR/node
#   e2e/local/node.sh down    # stops exactly the pids in $TUSK_E2E_DIR/node/pids, removes rules
#
# Network: pods live on bridge $TUSK_NODE_BRIDGE (tusk0) in $TUSK_NODE_POD_CIDR (10.244.0.0/24),
# the bridge's own address is the node's IP (10.244.0.1). Nothing leaves it: the bridge plugin
# does no masquerading (ipMasq: false), a mangle-table rule drops anything forwarded between the
# bridge and any other interface, and CoreDNS serves cluster.local only (no upstream resolver;
# other names are REFUSED). The apiserver (loopback only) is reached by pods through the
# `kubernetes` Service: an EndpointSlice to 10.244.0.1:6443, where socat relays to loopback.
# One real node per machine (the bridge and its subnet are fixed per machine).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DIR="${TUSK_E2E_DIR:-/tmp/tusk-e2e}"
NODE="$DIR/node"
NODE_NAME=${TUSK_NODE_NAME:-tusk-node-0}
BRIDGE=${TUSK_NODE_BRIDGE:-tusk0}
POD_CIDR=${TUSK_NODE_POD_CIDR:-10.244.0.0/24}
NODE_IP=${POD_CIDR%.*}.1
COREDNS_VERSION=v1.12.4
CACHE="${TUSK_TESTBIN:-$HOME/.cache/tusk-testbin}"
log() { echo "node.sh: $*" >&2; }
# shellcheck source=e2e/local/lib.sh
source "$here/lib.sh"

# The one iptables rule of ours (mangle runs before filter, where kube-proxy adds its own).
FENCE=(FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -m comment --comment tusk-e2e-node-fence -j DROP)
FENCE_IN=(FORWARD -o "$BRIDGE" ! -i "$BRIDGE" -m comment --comment tusk-e2e-node-fence -j DROP)

coredns_bin() {
  local bin="$CACHE/coredns-$COREDNS_VERSION/coredns"
  if [[ ! -x "$bin" ]]; then
    log "building CoreDNS $COREDNS_VERSION from the Go module proxy (cold: a few minutes)"
    local tmp="$CACHE/coredns-$COREDNS_VERSION.tmp"
    rm -rf "$tmp" && mkdir -p "$tmp"
    CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$tmp" nice -n 10 \
      go install -trimpath -ldflags='-s -w' "github.com/coredns/coredns@$COREDNS_VERSION" >&2
    rm -rf "${bin%/*}" && mv "$tmp" "${bin%/*}"
  fi
  echo "$bin"
}

start() {
  local name=$1; shift
  nohup "$@" >"$NODE/logs/$name.log" 2>&1 &
  echo $! >"$NODE/pids/$name.pid"
}

# cert NAME SUBJECT: a client certificate signed by up.sh's CA.
cert() {
  local name=$1 subject=$2 pki="$DIR/pki"
  openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$NODE/pki/$name.key" \
    -out "$NODE/pki/$name.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
    >"$NODE/pki/$name.ext"
  openssl x509 -req -in "$NODE/pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 7 -extfile "$NODE/pki/$name.ext" -out "$NODE/pki/$name.crt" 2>/dev/null
}

kubeconfig() {
  local name=$1
  cat >"$NODE/$name.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: tusk-e2e
  cluster: {server: "$SERVER", certificate-authority: "$DIR/pki/ca.crt"}
users:
- name: $name
  user: {client-certificate: "$NODE/pki/$name.crt", client-key: "$NODE/pki/$name.key"}
contexts:
- name: tusk-e2e
  context: {cluster: tusk-e2e, user: $name}
current-context: tusk-e2e
KC
}

up() {
  [[ -f "$DIR/env" ]] || { log "no control plane in $DIR (run TUSK_E2E_KWOK=0 e2e/local/up.sh)"; exit 1; }
  # shellcheck disable=SC1091
  source "$DIR/env"
  if [[ -d "$NODE/pids" ]] && compgen -G "$NODE/pids/*.pid" >/dev/null; then
    log "$NODE already holds a running node (run e2e/local/node.sh down first)"; exit 1
  fi
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "bridge $BRIDGE exists: another real node runs on this machine, or one was not cleaned up"; exit 1
  fi
  [[ $(id -u) == 0 ]] || { log "a real node needs root (kubelet, containerd, iptables)"; exit 1; }
  "$here/node-deps.sh" >&2
  eval "$("$here/binaries.sh")"
  local coredns; coredns=$(coredns_bin)
  local started=$SECONDS
  rm -rf "$NODE" && mkdir -p "$NODE"/{pids,logs,pki,cni/net.d,containerd,kubelet,pod-logs}
  SERVER=$(sed -n 's/.*server: "\(https:[^"]*\)".*/\1/p' "$DIR/admin.kubeconfig")
  local api_port=${SERVER##*:}
  trap 'rc=$?; if ((rc)); then log "failed; last log lines:"; tail -n 20 "$NODE"/logs/*.log >&2 || true; down >&2 || true; fi' EXIT

  log "bridge $BRIDGE $NODE_IP/${POD_CIDR#*/}, fenced in (no forwarding to or from other interfaces)"
  ip link add "$BRIDGE" type bridge
  ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  echo "$BRIDGE" >"$NODE/bridge"
  iptables -t mangle -I "${FENCE[@]}"
  iptables -t mangle -I "${FENCE_IN[@]}"
  touch "$NODE/fence"
  # Routing between pods and Service IPs happens on the host: forwarding on (the fence above
  # keeps it to the bridge), bridged traffic through iptables for kube-proxy.
  cat /proc/sys/net/ipv4/ip_forward >"$NODE/ip_forward.before"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables

  cat >"$NODE/cni/net.d/10-tusk.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "tusk-e2e",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$NODE/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON

  log "containerd $(containerd --version | awk '{print $3}') (runc, cgroupfs)"
  local sock="$NODE/containerd/containerd.sock"
  cat >"$NODE/containerd/config.toml" <<TOML
version = 2
root = "$NODE/containerd/root"
state = "$NODE/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/tusk-test/pause:e2e"
  enable_selinux = false
  # Lowering oom_score_adj (the kubelet asks -998 for sandboxes) is refused on this machine even
  # to root: never go below containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE/cni/net.d"
TOML
  start containerd containerd --config "$NODE/containerd/config.toml"
  wait_for "containerd" 60 ctr --address "$sock" version
  echo "export TUSK_CONTAINERD_SOCK=$sock" >>"$DIR/env"

  log "images into containerd"
  TUSK_CONTAINERD_SOCK=$sock "$here/images.sh" load >&2

  log "certificates for the kubelet (system:node:$NODE_NAME) and kube-proxy"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
  cert kube-proxy "/CN=system:kube-proxy"
  cert coredns "/CN=tusk-e2e-coredns"
  kubeconfig kubelet; kubeconfig kube-proxy; kubeconfig coredns
  # CoreDNS reads Services, EndpointSlices, Namespaces and Pods; kube-proxy's role is built in.
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: tusk-e2e-coredns}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: tusk-e2e-coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: tusk-e2e-coredns}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: tusk-e2e-coredns}]
---
# The apiserver listens on loopback; pods reach it at the kubernetes Service (10.96.0.1:443,
# its certificate's name) through socat on the bridge address.
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes, endpointslice.kubernetes.io/managed-by: tusk-e2e-node}
addressType: IPv4
endpoints: [{addresses: ["$NODE_IP"], conditions: {ready: true}}]
ports: [{name: https, port: 6443, protocol: TCP}]
YAML
  start apiserver-relay socat "TCP-LISTEN:6443,bind=$NODE_IP,reuseaddr,fork" "TCP:127.0.0.1:$api_port"

  log "CoreDNS $COREDNS_VERSION on $NODE_IP:53 (cluster.local only)"
  cat >"$NODE/Corefile" <<CF
cluster.local:53 {
    bind $NODE_IP
    errors
    kubernetes cluster.local {
        kubeconfig $NODE/coredns.kubeconfig tusk-e2e
        pods insecure
    }
    cache 5
}
CF
  start coredns "$coredns" -conf "$NODE/Corefile"

  log "kubelet $NODE_NAME ($NODE_IP)"
  cat >"$NODE/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups are v1 (with a v2 tree beside them); no systemd: cgroupfs. containerd
# 1.6 does not report its cgroup driver over CRI, so the kubelet falls back to this setting.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
# The apiserver of up.sh has no kubelet client certificate: exec/logs/port-forward come in
# anonymously. Acceptable on a throwaway node listening on its own bridge only.
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: $NODE/pod-logs
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
registerWithTaints: []
# A Secret's new content reaches the pods' volumes at their next sync: every minute by default,
# every 10 s here (the CA rotation scenario waits for three such steps; 235 s with the default).
syncFrequency: 10s
YAML
  start kubelet "$TUSK_KUBELET_BIN" --config "$NODE/kubelet.yaml" --kubeconfig "$NODE/kubelet.kubeconfig" \
    --root-dir "$NODE/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  wait_for "node $NODE_NAME registered" 120 kubectl get node "$NODE_NAME"

  log "kube-proxy (iptables)"
  local metrics_port; metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat >"$NODE/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $NODE/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: ""
metricsBindAddress: 127.0.0.1:$metrics_port
nodePortAddresses: ["$NODE_IP/32"]
conntrack: {maxPerCore: 0}
YAML
  start kube-proxy "$TUSK_KUBE_PROXY_BIN" --config "$NODE/kube-proxy.yaml"
  wait_for "kube-proxy's rules for the kubernetes Service" 60 \
    bash -c "iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q default/kubernetes"

  # The hostPath provisioner makes each volume 0750 root:root and the kubelet applies no fsGroup
  # to hostPath volumes: open them up for the non-root pods (a test-environment fixture).
  start pv-perms bash -c "while sleep 0.5; do
    for d in \$(\"$TUSK_KUBECTL_BIN\" --kubeconfig \"$KUBECONFIG\" get pv -o jsonpath='{range .items[*]}{.spec.hostPath.path}{\"\\n\"}{end}' 2>/dev/null); do
      case \$d in /tmp/hostpath_pv/*) [ -d \"\$d\" ] && chmod 0777 \"\$d\" ;; esac
    done
  done"

  kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=180s >/dev/null
  log "node $NODE_NAME Ready in $((SECONDS - started))s"
  trap - EXIT
}

down() {
  [[ -d "$NODE" ]] || return 0
  local sock="$NODE/containerd/containerd.sock"
  # Pods first, while containerd runs: every sandbox stopped and removed frees its netns and IP.
  if [[ -S "$sock" ]]; then
    local ns=(ctr --address "$sock" -n k8s.io)
    if [[ -f "$NODE/pids/kubelet.pid" ]]; then stop_pid "$(<"$NODE/pids/kubelet.pid")"; rm -f "$NODE/pids/kubelet.pid"; fi
    local crictl_like netns=()
    # The pods' network namespaces (made by containerd's CNI for each sandbox): deleting them
    # removes the pods' veth pairs, which nothing else would once the kubelet is gone.
    for crictl_like in $("${ns[@]}" containers ls -q 2>/dev/null); do
      mapfile -t -O "${#netns[@]}" netns < <("${ns[@]}" containers info "$crictl_like" 2>/dev/null \
        | grep -o '/var/run/netns/cni-[0-9a-f-]*' | sort -u)
    done
    for crictl_like in $("${ns[@]}" tasks ls -q 2>/dev/null); do
      "${ns[@]}" tasks kill -s SIGKILL "$crictl_like" >/dev/null 2>&1 || true
    done
    sleep 1
    for crictl_like in $("${ns[@]}" tasks ls -q 2>/dev/null); do
      "${ns[@]}" tasks delete -f "$crictl_like" >/dev/null 2>&1 || true
    done
    for crictl_like in $("${ns[@]}" containers ls -q 2>/dev/null); do
      "${ns[@]}" containers delete "$crictl_like" >/dev/null 2>&1 || true
    done
    local n
    for n in $(printf '%s\n' "${netns[@]}" | sort -u); do
      umount "$n" 2>/dev/null || true
      ip netns delete "${n##*/}" 2>/dev/null || rm -f "$n"
    done
  fi
  local name
  for name in pv-perms kube-proxy kubelet coredns apiserver-relay containerd; do
    [[ -f "$NODE/pids/$name.pid" ]] || continue
    stop_pid "$(<"$NODE/pids/$name.pid")"
    rm -f "$NODE/pids/$name.pid"
  done
  # Leftovers of the pods: network namespaces containerd made, mounts under the node directory.
  local m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(awk -v d="$NODE/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r)
  if [[ -f "$NODE/fence" ]]; then
    while iptables -t mangle -D "${FENCE[@]}" 2>/dev/null; do :; done
    while iptables -t mangle -D "${FENCE_IN[@]}" 2>/dev/null; do :; done
    rm -f "$NODE/fence"
  fi
  # kube-proxy's chains (KUBE-*), which only it and this node use.
  if [[ -n "${TUSK_KUBE_PROXY_BIN:-}" && -x "${TUSK_KUBE_PROXY_BIN}" ]]; then
    "$TUSK_KUBE_PROXY_BIN" --cleanup >/dev/null 2>&1 || true
  fi
  # The kubelet's own chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT), IPv4 and IPv6.
  local ipt table chain
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    while "$ipt" -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    while "$ipt" -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    for table in filter nat mangle; do
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        if "$ipt" -t "$table" -F "$chain" 2>/dev/null; then
          "$ipt" -t "$table" -X "$chain" 2>/dev/null || true
        fi
      done
    done
  done
  if [[ -f "$NODE/bridge" ]]; then
    ip link del "$(<"$NODE/bridge")" 2>/dev/null || true
    rm -f "$NODE/bridge"
  fi
  if [[ -f "$NODE/ip_forward.before" ]]; then
    cat "$NODE/ip_forward.before" >/proc/sys/net/ipv4/ip_forward
  fi
  # The kubelet's cgroups (cgroupfs driver): /kubepods in every v1 hierarchy, deepest first.
  local c
  for c in /sys/fs/cgroup/*/kubepods; do
    if [[ -d "$c" ]]; then
      find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    fi
  done
  rm -rf "$NODE"
  log "node stopped"
}

case ${1:-} in
  up) up ;;
  down)
    if [[ -f "$DIR/env" ]]; then
      # shellcheck disable=SC1091
      source "$DIR/env"
      eval "$("$here/binaries.sh" 2>/dev/null)" || true
    fi
    down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
