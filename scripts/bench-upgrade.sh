#!/usr/bin/env bash
# The online major-version upgrade at a user's size, on real pods (e2e/local/node-run.sh): a
# two-instance cluster on the older major loaded with GIB GiB of rows (about 1 KiB each), a
# writer through -rw, spec.version raised. Prints the time in each phase, the writer's longest
# gap, the acknowledged rows checked (a lost one fails the run) and the new set's extra disk.
#   scripts/bench-upgrade.sh [GIB]   # default 1
set -euo pipefail
cd "$(dirname "$0")/.."
export TUSK_UPGRADE_BENCH_GIB=${1:-1}
# Loading and copying a GiB on two cores takes minutes; each wait is bounded by this.
export E2E_TIMEOUT=${E2E_TIMEOUT:-900}
exec e2e/local/node-run.sh upgrade_benchmark
