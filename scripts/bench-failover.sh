#!/usr/bin/env bash
# The failover benchmark on real pods: a three-instance cluster on the local real node
# (e2e/local/node-run.sh), TRIALS kills of the primary's postmaster, TRIALS switchovers, TRIALS
# force-deletions of the primary's pod and TRIALS freezes of the primary, each measured by a
# writer through the -rw Service. Prints the write gaps (p50, p99, max) and the acknowledged rows
# checked (a lost one fails the run): four series, so 50 trials make 200 faults.
#   scripts/bench-failover.sh [TRIALS] [required|preferred|async]   # default 20, required
# TUSK_FAILOVER_SERIES=delete,freeze (any of kill, switchover, delete, freeze) runs only those.
set -euo pipefail
cd "$(dirname "$0")/.."
export TUSK_FAILOVER_TRIALS=${1:-20}
export TUSK_FAILOVER_DURABILITY=${2:-required}
# Each force-deletion waits out the Lease, a promotion and the old primary's rejoin.
export E2E_TIMEOUT=${E2E_TIMEOUT:-300}
exec e2e/local/node-run.sh ha_failover_benchmark
