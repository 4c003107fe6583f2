#!/usr/bin/env bash
# Try Tusk without Docker: a throwaway control plane on loopback (upstream kube-apiserver,
# controller-manager, scheduler, etcd; kwok plays the node, so pods turn Ready without running),
# the operator built from this tree, and samples/postgresql.yaml. Everything stays up.
# Usage: e2e/local/demo.sh     then: source /tmp/tusk-demo/env; kubectl get pg,all
# Stop:  TUSK_E2E_DIR=/tmp/tusk-demo e2e/local/down.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export TUSK_E2E_DIR="${TUSK_E2E_DIR:-/tmp/tusk-demo}"

eval "$("$here/binaries.sh")"
echo "demo.sh: building the operator (cargo build --bin tusk)" >&2
(cd "$repo" && cargo build --locked --quiet --bin tusk)
target_dir=$(cd "$repo" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
eval "$("$here/up.sh")"
cp "$target_dir/debug/tusk" "$TUSK_E2E_DIR/tusk"
"$here/operator.sh" install
"$here/operator.sh" start

kubectl apply -f "$repo/samples/postgresql.yaml"
kubectl wait postgresql/demo --for=condition=Ready --timeout=120s
kubectl get pg
cat <<MSG

The operator's log: $TUSK_E2E_DIR/logs/operator.log
Use it:  source $TUSK_E2E_DIR/env; kubectl get pg,statefulset,service,secret,configmap
Stop it: TUSK_E2E_DIR=$TUSK_E2E_DIR $here/down.sh
MSG
