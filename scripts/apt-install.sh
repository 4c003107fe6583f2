#!/usr/bin/env bash
# Installs the given Debian packages as root (or through sudo); with none, says WHAT is present.
# Usage: scripts/apt-install.sh WHAT [PACKAGE...]
set -euo pipefail
what=$1
shift
if (($# == 0)); then
  echo "$what present"
  exit 0
fi
echo "installing: $*"
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends keeps podman from pulling in crun-only or rootless extras we do not use.
$SUDO apt-get install -y -qq --no-install-recommends "$@"
