#!/usr/bin/env bash
# The failover benchmark on real pods: a three-instance cluster on the local real node
# (e2e/local/node-run.sh), TRIALS kills of the primary's postmaster and TRIALS force-deletions
# of the primary's pod, each measured by a writer through the -rw Service. Prints the write gaps
# (p50, p99, max) and the acknowledged rows lost (asserted to be 0).
#   scripts/bench-failover.sh [TRIALS]     # default 20
set -euo pipefail
cd "$(dirname "$0")/.."
export TUSK_FAILOVER_TRIALS=${1:-20}
# Each force-deletion waits out the Lease, a promotion and the old primary's rejoin.
export E2E_TIMEOUT=${E2E_TIMEOUT:-300}
exec e2e/local/node-run.sh ha_failover_benchmark
