#!/usr/bin/env bash
# The instance manager's WAL archiver draining a backlog into a local MinIO (issue 27): prints
# MiB/s and the manager's peak RSS with one upload at a time and with the default four; then
# the archive's lag (files waiting, p50/p99/max) under pgbench -N for TUSK_BENCH_LAG_SECONDS (60).
# TUSK_BENCH_WAL_MIB sets the backlog (default 1024). Needs PostgreSQL's server binaries and MinIO (scripts/testbin.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/testbin.sh minio)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tusk-target}"
cargo test --release --locked -p tusk-instance --test archive_throughput -- \
  --ignored --nocapture --test-threads 1 2>&1 | grep -E "archive backlog|archive lag|test result|panicked"
