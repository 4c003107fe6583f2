#!/usr/bin/env bash
# What verifying a physical backup costs against the database's size (issue 28): for pgbench
# scales 35 and 70 (about 0.5 and 1 GiB; TUSK_BENCH_VERIFY_SCALES to change), a base backup into
# a local MinIO, WAL after it, the primary's restore point with its counts, then
# `backup-agent verify-restore`: restore, pg_verifybackup, the archive walk, recovery to the
# point, pg_amcheck --heapallindexed and every count. Prints one line per size.
# Needs PostgreSQL's server binaries with pgbench, and Go for MinIO (scripts/testbin.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/testbin.sh minio)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tusk-target}"
cargo test --release --locked -p backup-agent --test verify_physical -- \
  --ignored --nocapture --test-threads 1 2>&1 | grep -E "verification cost|test result|panicked"
