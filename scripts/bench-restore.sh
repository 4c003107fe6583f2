#!/usr/bin/env bash
# A point-in-time restore's replay rate (issue 27): a base backup, a backlog of archived WAL in
# a local MinIO, and a new cluster restored from them to the end of the archive by its instance
# manager. Prints the unpack time and the replay rate in MiB/s. TUSK_BENCH_WAL_MIB sets the
# backlog (default 1024). Needs PostgreSQL's server binaries and MinIO (scripts/testbin.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/testbin.sh minio)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tusk-target}"
# The manager runs the agent binary that sits beside it in the target directory.
cargo build --release --locked -p backup-agent --bin backup-agent
cargo test --release --locked -p tusk-instance --test restore_throughput -- \
  --ignored --nocapture --test-threads 1 2>&1 | grep -E "restore:|test result|panicked"
