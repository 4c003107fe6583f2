#!/usr/bin/env bash
# Runs a command on this machine as if it were inside the e2e cluster, name-wise: the in-cluster
# names of the services e2e/local provides resolve to their local addresses. Today that is
# MinIO (`minio.minio.svc.cluster.local`, `minio.minio.svc`, `minio.minio` -> the loopback
# address where e2e/local/storage.sh serves port 9000), so the operator, run as a process, reads
# backup manifests at the endpoint the samples name, exactly as it would in a cluster.
#
#   e2e/local/incluster.sh COMMAND [ARGS...]     # exec: COMMAND keeps this script's pid
#
# How: a private mount namespace in which $TUSK_E2E_DIR/hosts (a copy of /etc/hosts plus the
# entries storage.sh keeps in it, rewritten in place) is bind-mounted over /etc/hosts. Nothing
# outside the command sees it. Entries added later (MinIO started after the operator) show up
# at once: the bind mount follows the file, not a copy. Needs root or unprivileged user
# namespaces; without either the command runs unchanged, with a warning.
set -euo pipefail
DIR="${TUSK_E2E_DIR:-/tmp/tusk-e2e}"
hosts="$DIR/hosts"
(($#)) || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
mkdir -p "$DIR"
[[ -f "$hosts" ]] || cp /etc/hosts "$hosts"

if [[ $EUID -eq 0 ]]; then
  ns=(unshare --mount --propagation private)
else
  ns=(unshare --user --map-root-user --mount --propagation private)
fi
# shellcheck disable=SC2016 # expanded by the inner shell
if "${ns[@]}" -- sh -c 'mount --bind "$0" /etc/hosts' "$hosts" 2>/dev/null; then
  exec "${ns[@]}" -- sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$hosts" "$@"
fi
echo "incluster.sh: cannot create a mount namespace here; in-cluster names will not resolve" >&2
exec "$@"
