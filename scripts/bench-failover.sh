#!/usr/bin/env bash
# The failover benchmark on real pods: a three-instance cluster on the local real node
# (e2e/local/node-run.sh), TRIALS of each fault — the primary's postmaster killed, a switchover,
# the primary's pod force-deleted, the primary frozen, the primary's claim and pod deleted, a
# replica promoted by hand, the primary's instance manager frozen alone, a replica back from a
# scale-down without its WAL — each measured by a writer through the -rw Service. Prints the
# write gaps (p50, p99, max) and the acknowledged rows checked (a lost one fails the run): eight
# series, so 40 trials make 320 faults.
#   scripts/bench-failover.sh [TRIALS] [required|preferred|async]   # default 20, required
# TUSK_FAILOVER_SERIES=delete,freeze (any of kill, switchover, delete, freeze, wipe, rogue,
# manager, regrow) runs only those. TUSK_FAILOVER_BURST=999 applies that many new clusters (their
# pods stay Pending) right before each freeze trial: the failover measured while the operator's
# queue holds their first reconciles.
set -euo pipefail
cd "$(dirname "$0")/.."
export TUSK_FAILOVER_TRIALS=${1:-20}
export TUSK_FAILOVER_DURABILITY=${2:-required}
# Each force-deletion waits out the Lease, a promotion and the old primary's rejoin.
export E2E_TIMEOUT=${E2E_TIMEOUT:-300}
exec e2e/local/node-run.sh ha_failover_benchmark
