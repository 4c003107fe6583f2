#!/usr/bin/env bash
# Installs the Debian packages the real node and the local image builds need, when missing:
# podman/buildah (image builds, on Debian's runc), mmdebstrap (base images from Debian packages),
# containerd and runc (the node's container runtime), containernetworking-plugins (bridge,
# host-local, loopback, portmap), iptables/conntrack/socat/ethtool (kube-proxy and port-forward),
# tcpdump (the TLS scenario's capture of the pod network).
set -euo pipefail

need=(podman buildah mmdebstrap containerd runc containernetworking-plugins iptables conntrack socat
  ethtool ipset uidmap tcpdump)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
exec "$(dirname "$0")/../../scripts/apt-install.sh" "node packages" "${missing[@]}"
