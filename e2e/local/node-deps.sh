#!/usr/bin/env bash
# Installs the Debian packages the real node and the local image builds need, when missing:
# podman/buildah (image builds, on Debian's runc), mmdebstrap (base images from Debian packages),
# containerd and runc (the node's container runtime), containernetworking-plugins (bridge,
# host-local, loopback, portmap), iptables/conntrack/socat/ethtool (kube-proxy and port-forward).
set -euo pipefail

need=(podman buildah mmdebstrap containerd runc containernetworking-plugins iptables conntrack socat
  ethtool ipset uidmap)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "node packages present"
  exit 0
fi
echo "installing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends keeps podman from pulling in crun-only or rootless extras we do not use.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
