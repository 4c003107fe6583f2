#!/usr/bin/env bash
# The archive on day 30 (issue 46) on a local MinIO: a generator writes 30 days of an archive at
# the 5 s archive_timeout (17,280 segments a day, 518,000 objects; TUSK_BENCH_SEGMENTS_PER_DAY for
# another rate), then prints at day 1 and at day 30 the list requests, GETs, deletes and seconds
# of each walk: base-restore latest, restore admission (time, LSN, end of the archive), the
# continuity check (whole, and the hourly one), retention, and onDelete: Delete. Needs MinIO
# (scripts/testbin.sh); the generator takes ~25 min at 17,280 a day on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/testbin.sh minio)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tusk-target}"
cargo test --locked -p tusk --test archive_day30 -- --ignored --nocapture --test-threads 1 2>&1 |
  grep -E "^archive|test result|panicked"
