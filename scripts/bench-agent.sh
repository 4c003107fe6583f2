#!/usr/bin/env bash
# Benchmarks backup-agent against plain pg_dump/pg_restore on pgbench databases.
#
#   scripts/bench-agent.sh [SCALE ...]        # default: 35 70   (scale 70 is about 1 GiB)
#   scripts/bench-agent.sh --verify [SCALE ...]   # default: 20     (scale 20 is about 300 MiB)
#
# --verify measures what issue 15's proof costs instead: `backup` with and without recording
# row counts (--record-counts=false), `restore` into the local server, and `verify-restore`
# (initdb + restore + pg_amcheck + counts in a scratch server, run as a non-root user).
#
# For each scale: pg_dump -Fc > /dev/null vs `backup-agent backup` into a local MinIO (zstd),
# the agent's peak RSS (from its own summary line, VmHWM), and `backup-agent restore` vs a
# local `pg_restore` of a pg_dump -Fc file. Needs: PostgreSQL server+client, pgbench, curl,
# /usr/bin/time, Go (for scripts/testbin.sh). Everything runs on 127.0.0.1 and is torn down.
set -euo pipefail
cd "$(dirname "$0")/.."

VERIFY=false
if [[ "${1:-}" == --verify ]]; then VERIFY=true; shift; fi
SCALES=("${@:-35}")
[[ $# -eq 0 ]] && SCALES=(35 70)
[[ $# -eq 0 ]] && $VERIFY && SCALES=(20)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
eval "$(scripts/testbin.sh)"
cargo build --release -q -p backup-agent
AGENT="$CARGO_TARGET_DIR/release/backup-agent"
PGBIN="${TUSK_PG_BIN_DIR:-$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d | sort -V | tail -1)}"

WORK=$(mktemp -d /tmp/tusk-bench.XXXXXX)
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

as_pg "$PGBIN/initdb" -D "$WORK/pg" -U postgres --auth=trust --no-sync >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w \
  -o "-p $PGPORT -k $WORK -c listen_addresses=127.0.0.1 -c max_wal_size=4GB" start >/dev/null

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

export PGHOST=127.0.0.1 PGPORT PGUSER=postgres
export TUSK_STORE=s3 TUSK_BUCKET=bench TUSK_S3_ENDPOINT="http://127.0.0.1:$S3PORT" TUSK_S3_FORCE_PATH_STYLE=true
export AWS_ACCESS_KEY_ID=benchadmin AWS_SECRET_ACCESS_KEY=bench-secret-123 AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export TUSK_NAMESPACE=bench TUSK_PATH="" TUSK_PG_BIN_DIR="$PGBIN" TUSK_WORK_DIR="$WORK"

# wall seconds of a command (its stdout goes to $WORK/out)
timed() { /usr/bin/time -f "%e" -o "$WORK/time" "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; return 1; }; cat "$WORK/time"; }
field() { python3 -c "import json,sys; print(json.loads(open('$WORK/out').read().splitlines()[-1])$1)"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
# pgbench database "bench<scale>", vacuumed; prints its size in bytes.
pgbench_db() {
  "$PGBIN/createdb" "bench$1"
  "$PGBIN/pgbench" -i -q -s "$1" "bench$1" >/dev/null 2>&1
  "$PGBIN/psql" -X -q -d "bench$1" -c "VACUUM ANALYZE" >/dev/null
  "$PGBIN/psql" -X -A -t -d "bench$1" -c "SELECT pg_database_size('bench$1')"
}

if $VERIFY; then
  # verify-restore refuses root: a copy of the agent the postgres user can execute.
  install -m 755 "$AGENT" "$WORK/backup-agent"
  AS_PG=(); [[ $(id -u) == 0 ]] && AS_PG=(runuser -u postgres --)
  export TUSK_SCRATCH_DIR="$WORK"
  printf '%-6s %7s | %9s %9s %6s | %9s | %9s %7s %9s %10s\n' scale "db MiB" "backup s" "no-count s" "extra" \
    "restore s" "verify s" "RSS" tables rows
  for scale in "${SCALES[@]}"; do
    db="bench$scale"
    size=$(pgbench_db "$scale")
    # Alternating, best of three each: the page cache favours whichever runs later.
    t_plain=999999; t_counted=999999
    for run in 1 2 3; do
      t=$(timed "$AGENT" backup --cluster "$db" --database "$db" --backup-id "plain$run" --record-counts=false)
      t_plain=$(awk -v a="$t" -v b="$t_plain" 'BEGIN { print (a < b ? a : b) }')
      t=$(timed "$AGENT" backup --cluster "$db" --database "$db" --backup-id "counted$run")
      t_counted=$(awk -v a="$t" -v b="$t_counted" 'BEGIN { print (a < b ? a : b) }')
    done
    "$PGBIN/dropdb" "$db"
    t_restore=$(timed "$AGENT" restore --cluster "$db" --backup-id counted1)
    "$PGBIN/dropdb" "$db"
    t_verify=$(timed "${AS_PG[@]}" "$WORK/backup-agent" verify-restore --cluster "$db" --backup-id counted1)
    [[ $(field "['details']['phase']") == Passed ]] || { cat "$WORK/out" >&2; exit 1; }
    # Where the time went, from the agent's log lines.
    phases=$(python3 - "$WORK/err" <<'PY'
import re, sys
from datetime import datetime
marks = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+Z)\s", line)
    if not m:
        continue
    t = datetime.fromisoformat(m.group(1)[:26].rstrip("Z") + "+00:00")
    for key, text in [("start", "verification starting"), ("ready", "scratch server ready"),
                      ("restored", 'check="restore"'), ("amcheck", 'check="amcheck"'),
                      ("counts", 'check="counts"'), ("stopped", "scratch server stopped")]:
        if text in line:
            marks[key] = t
steps = ["start", "ready", "restored", "amcheck", "counts", "stopped"]
names = ["initdb+start", "download+restore", "databases+amcheck", "counts", "stop"]
print(", ".join(f"{n} {(marks[b] - marks[a]).total_seconds():.1f} s"
                for n, a, b in zip(names, steps, steps[1:])))
PY
)
    extra=$(awk -v a="$t_counted" -v b="$t_plain" 'BEGIN { printf "%+.0f%%", (a - b) * 100 / b }')
    printf '%-6s %7s | %9s %9s %6s | %9s | %9s %6sM %9s %10s\n' "$scale" "$(mib "$size")" "$t_counted" "$t_plain" \
      "$extra" "$t_restore" "$t_verify" "$(mib "$(field "['peakRssBytes']")")" \
      "$(field "['details']['tables']")" "$(field "['details']['rows']")"
    echo "       verify-restore: $phases"
  done
  echo "backup = with row counts (default), no-count = --record-counts=false: best of 3 each"
  echo "restore = backup-agent restore into the local server; verify = verify-restore wall time"
  exit 0
fi

printf '%-6s %7s | %9s %8s %6s %7s %8s | %8s %8s %8s | %10s %10s\n' scale "db MiB" "pg_dump s" "agent s" ratio stored "RSS" "none s" "stored" "RSS" "pg_restore" "agent rest"
for scale in "${SCALES[@]}"; do
  db="bench$scale"
  size=$(pgbench_db "$scale")

  t_dump=$(timed "$PGBIN/pg_dump" -Fc -d "$db")
  t_agent=$(timed "$AGENT" backup --cluster "$db" --database "$db" --backup-id b1)
  stored=$(field "['details']['sizeBytes']"); rss=$(field "['peakRssBytes']")
  # Uncompressed: many 8 MiB parts, which shows whether memory stays flat as the dump grows.
  t_none=$(timed "$AGENT" backup --cluster "$db" --database "$db" --backup-id b2 --compression none)
  stored_none=$(field "['details']['sizeBytes']"); rss_none=$(field "['peakRssBytes']")

  "$PGBIN/pg_dump" -Fc -d "$db" -f "$WORK/$db.dump"
  "$PGBIN/dropdb" "$db"
  t_agent_restore=$(timed "$AGENT" restore --cluster "$db" --backup-id b1)
  "$PGBIN/dropdb" "$db"
  "$PGBIN/createdb" "$db"
  t_restore=$(timed "$PGBIN/pg_restore" -d "$db" "$WORK/$db.dump")
  "$PGBIN/dropdb" "$db"
  rm -f "$WORK/$db.dump"

  ratio=$(awk -v a="$t_agent" -v d="$t_dump" 'BEGIN { printf "%.2f", d / a }')
  printf '%-6s %7s | %9s %8s %6s %6sM %7sM | %8s %7sM %7sM | %10s %10s\n' "$scale" "$(mib "$size")" "$t_dump" \
    "$t_agent" "${ratio}x" "$(mib "$stored")" "$(mib "$rss")" "$t_none" "$(mib "$stored_none")" "$(mib "$rss_none")" \
    "$t_restore" "$t_agent_restore"
done
echo "agent = zstd (default); none = --compression none; RSS = the agent's own peak (VmHWM)"
echo "ratio = pg_dump time / agent time (>= 0.90 means the agent keeps >= 90 % of pg_dump's throughput)"
