#!/usr/bin/env bash
# Base backup throughput (issue 27's goal: `backup-agent base-backup` at >= 90 % of plain
# pg_basebackup): a pgbench database on a local PostgreSQL that archives through the agent, and
# a local MinIO. Three rounds, interleaved so the page cache favours neither:
#   - `pg_basebackup -Ft -D - -X none --checkpoint=fast > /dev/null` (the agent's own
#     pg_basebackup arguments, nothing compressed or stored);
#   - `backup-agent base-backup` (the same stream through zstd into MinIO, complete only once
#     the archive holds its WAL); bytes stored and the agent's peak RSS.
#
#   scripts/bench-base-backup.sh [SCALE]   # default 70 (about 1 GiB)
#
# BENCH_ZSTD_PROBE=1 also times the zstd CLI alone (levels 1 and 3, one thread) on the tar.
#
# Needs: PostgreSQL server+client, pgbench, curl, /usr/bin/time, Go (scripts/testbin.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE="${1:-70}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tusk-target}"
eval "$(scripts/testbin.sh)"
cargo build --release -q -p backup-agent
PGBIN="${TUSK_PG_BIN_DIR:-$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d | sort -V | tail -1)}"

WORK=$(mktemp -d /tmp/tusk-bench-base.XXXXXX)
chmod 755 "$WORK"
as_pg() { if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[[ $(id -u) == 0 ]] && chown postgres "$WORK"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PGPORT=$(free_port); S3PORT=$(free_port); CONSOLE=$(free_port)
MINIO_PID=""
cleanup() {
  # shellcheck disable=SC2181 # the status the script is exiting with
  [[ $? != 0 ]] && { echo "--- server log:" >&2; tail -20 "$WORK/pg.log" >&2; }
  as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate -w stop >/dev/null 2>&1 || true
  if [[ -n "$MINIO_PID" ]]; then kill "$MINIO_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/minio"
MINIO_ROOT_USER=benchadmin MINIO_ROOT_PASSWORD=bench-secret-123 MINIO_BROWSER=off \
  "$TUSK_MINIO_BIN" server "$WORK/minio" --address "127.0.0.1:$S3PORT" \
  --console-address "127.0.0.1:$CONSOLE" >"$WORK/minio.log" 2>&1 &
MINIO_PID=$!
for _ in $(seq 1 300); do
  curl -fs "http://127.0.0.1:$S3PORT/minio/health/ready" >/dev/null && break
  sleep 0.2
done
curl -fs -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user benchadmin:bench-secret-123 \
  "http://127.0.0.1:$S3PORT/bench" >/dev/null

export TUSK_STORE=s3 TUSK_BUCKET=bench TUSK_S3_ENDPOINT="http://127.0.0.1:$S3PORT" TUSK_S3_FORCE_PATH_STYLE=true
export AWS_ACCESS_KEY_ID=benchadmin AWS_SECRET_ACCESS_KEY=bench-secret-123 AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export TUSK_NAMESPACE=bench TUSK_CLUSTER=db TUSK_PATH="" TUSK_PG_BIN_DIR="$PGBIN"

# The server archives through the agent (a copy its user can run), as the manager would.
install -m 755 "$CARGO_TARGET_DIR/release/backup-agent" "$WORK/backup-agent"
{
  echo '#!/bin/sh'
  env | grep -E '^(TUSK_|AWS_)' | sed "s/^\([^=]*\)=\(.*\)$/export \1='\2'/"
  echo "exec $WORK/backup-agent wal-push \"\$@\""
} >"$WORK/wal-push.sh"
chmod 755 "$WORK/wal-push.sh"
as_pg "$PGBIN/initdb" -D "$WORK/pg" -U postgres --auth=trust --no-sync >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w -o "-p $PGPORT -k $WORK \
  -c listen_addresses=127.0.0.1 -c max_wal_size=4GB -c archive_mode=on \
  -c archive_command='$WORK/wal-push.sh %p'" start >/dev/null
export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=postgres

"$PGBIN/pgbench" -i -q -s "$SCALE" postgres >/dev/null 2>&1
"$PGBIN/psql" -X -q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
size=$("$PGBIN/psql" -X -A -t -c "SELECT sum(pg_database_size(datname)) FROM pg_database")

seconds() { /usr/bin/time -f "%e" -o "$WORK/time" "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; return 1; }; cat "$WORK/time"; }
field() { python3 -c "import json; print(json.loads(open('$WORK/out').read().splitlines()[-1])$1)"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
plain() { "$PGBIN/pg_basebackup" -Ft -D - -X none --checkpoint=fast --no-password; }

printf 'data %s MiB (pgbench scale %s)\n' "$(mib "$size")" "$SCALE"
printf '%-5s | %14s | %13s %9s %9s | %6s\n' run "pg_basebackup s" "agent s" "stored" "RSS" "ratio"
for run in 1 2 3; do
  t_plain=$(seconds bash -c "$(declare -f plain); PGBIN='$PGBIN' plain > /dev/null")
  t_agent=$(seconds "$WORK/backup-agent" base-backup --backup-id "base$run")
  # A field the agent's report lacks is no figure: the benchmark stops and says so.
  stored=$(field "['details']['sizeBytes']" 2>/dev/null || field "['sizeBytes']" 2>/dev/null) ||
    { echo "no sizeBytes in the agent's report: $(tail -1 "$WORK/out")" >&2; exit 1; }
  rss=$(field "['peakRssBytes']" 2>/dev/null) ||
    { echo "no peakRssBytes in the agent's report: $(tail -1 "$WORK/out")" >&2; exit 1; }
  ratio=$(awk -v p="$t_plain" -v a="$t_agent" 'BEGIN { printf "%.0f%%", p * 100 / a }')
  printf '%-5s | %14s | %13s %8sM %8sM | %6s\n' "$run" "$t_plain" "$t_agent" "$(mib "$stored")" "$(mib "$rss")" "$ratio"
done
if [[ -n "${BENCH_ZSTD_PROBE:-}" ]]; then
  plain > "$WORK/base.tar"
  for level in 1 3; do
    echo "zstd -$level: $( { /usr/bin/time -f %e zstd -q -"$level" -T1 -c "$WORK/base.tar" > /dev/null; } 2>&1 ) s"
  done
  echo "plain to a file then cat: $( { /usr/bin/time -f %e cat "$WORK/base.tar" > /dev/null; } 2>&1 ) s"
fi
echo "ratio = pg_basebackup's time / the agent's (the agent's throughput as a share of plain pg_basebackup's)"
