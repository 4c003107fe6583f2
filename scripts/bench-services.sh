#!/usr/bin/env bash
# The API server's own pace at Services, the floor under the scale benchmark's "every child
# created": on a fresh local control plane (e2e/local/up.sh, the same flags as the benchmark's),
# tusk-service-rate creates COUNT Services with a ClusterIP and COUNT headless ones, CONCURRENCY
# at a time, and prints the rate and latencies of each.
#   scripts/bench-services.sh [COUNT] [CONCURRENCY]     # default 3000 16
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
count=${1:-3000}
concurrency=${2:-16}
(cd "$repo" && cargo build --locked --quiet -p tusk-e2e --bin tusk-service-rate)
target=$(cd "$repo" && cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
eval "$("$repo/e2e/local/binaries.sh")"
export TUSK_E2E_DIR
TUSK_E2E_DIR=$(mktemp -d -u /tmp/tusk-services.XXXXXX)
trap '"$repo/e2e/local/down.sh" >/dev/null 2>&1 || true' EXIT
eval "$("$repo/e2e/local/up.sh")"
"$target/debug/tusk-service-rate" --count "$count" --concurrency "$concurrency"
