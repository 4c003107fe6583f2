#!/usr/bin/env bash
# A major-version upgrade at a user's size, on real pods (e2e/local/node-run.sh): a
# two-instance cluster on the older major loaded with GIB GiB of rows (about 1 KiB each), a
# writer through -rw, spec.version raised online (default) or in place. Prints the time in each
# phase, the writer's longest gap (in place: the downtime), the acknowledged rows checked (a lost
# one fails the run) and the disk it took.
#   scripts/bench-upgrade.sh [GIB] [online|inPlace]   # default 1 online
set -euo pipefail
cd "$(dirname "$0")/.."
export TUSK_UPGRADE_BENCH_GIB=${1:-1}
export TUSK_UPGRADE_BENCH_METHOD=${2:-online}
# Loading and copying a GiB on two cores takes minutes; each wait is bounded by this.
export E2E_TIMEOUT=${E2E_TIMEOUT:-900}
exec e2e/local/node-run.sh upgrade_benchmark
