#!/usr/bin/env bash
# Tusk and the backup tools users would pick instead, side by side on this machine (issue 28):
# one PostgreSQL 15 and one local MinIO (TLS, as pgBackRest's S3 client speaks nothing else),
# the same cluster, the same data and the same bucket server for every tool, in one run.
#
#   scripts/bench-peers.sh [REPEATS]     # default 3; prints median (min-max) per tool and measure
#
# Measures, for each tool in turn (the order rotates with each repeat):
#   1. WAL archive throughput: TUSK_BENCH_PEERS_WAL_MIB (2048) MiB of WAL piles up as .ready
#      segments while archive_command is empty, then the tool's archive_command is set and the
#      time until no .ready file is left (and the last segment is .done) gives MiB/s.
#   2. Archive lag: pgbench on a scale-20 database for TUSK_BENCH_PEERS_LAG_SECONDS (60) with the
#      load of scripts/bench-archive.sh (simple-update, one transaction in ten a 2,000-row insert,
#      synchronous_commit off, 8 clients); the files waiting in pg_wal/archive_status/*.ready,
#      sampled every 200 ms: p50, p99, max.
#   3. Base backup of a pgbench database of scale TUSK_BENCH_PEERS_SCALE (70, about 1 GiB): wall
#      time, bytes the backup added to the bucket (its WAL excluded), and the peak of the summed
#      RSS of the tool's process tree (sampled every 200 ms; Tusk's includes the pg_basebackup it
#      runs).
#   4. Restore: TUSK_BENCH_PEERS_REPLAY_MIB (1024) MiB of WAL written after that backup and
#      archived by the tool, then the backup restored into a new data directory and recovered to
#      a target time just after that WAL; the time from the start of the restore until the
#      server accepts writes (promoted), the restored row count checked against the source's.
#
# The source cluster is run by Tusk's instance manager (`tusk-instance run`, as in a pod), since
# Tusk's archiver lives there; the peers archive from the same server through archive_command
# (ALTER SYSTEM), so each tool reads the same WAL files from the same disk.
#
# Configurations (the tools' documented knobs for parallelism and compression; 4 parallel
# transfers wherever a tool has a knob, as Tusk's archiver has 4 uploads in flight; the
# compression Tusk uses, zstd level 1, wherever a tool offers it, else the tool's fastest):
#   - Tusk (this tree, release build): archive_command `tusk-instance wal-push %p`, the manager
#     uploading up to 4 segments at once, zstd level 1; `backup-agent base-backup` (pg_basebackup
#     -Ft into zstd level 1, one stream); restore by a new manager with TUSK_RESTORE_BACKUP_ID
#     and TUSK_RESTORE_TARGET_TIME (`backup-agent base-restore`, then `tusk-instance wal-fetch`
#     with the manager's prefetch).
#   - WAL-G v0.2.20, built from the Go module proxy (the newest version it serves here; see
#     scripts/testbin.sh, which also renames its two backup-start/stop calls for PostgreSQL 15):
#     WALG_COMPRESSION_METHOD=lz4 (its default and fastest; its zstd is fixed at level 3),
#     WALG_UPLOAD_CONCURRENCY=4 (wal-push uploads the next .ready files ahead; backup-push
#     uploads 4 tar parts at once), WALG_DOWNLOAD_CONCURRENCY=4 (backup-fetch and wal-fetch's
#     prefetch).
#   - pgBackRest 2.45 (Debian's package): archive-async=y with process-max=4 (archive-push and
#     archive-get queue in a spool), compress-type=zst compress-level=1, backup and restore with
#     process-max=4, start-fast=y.
#   - barman-cloud 3.19.1 (PyPI, barman[cloud]; 3.20 needs Python 3.12, Debian 12 has 3.11):
#     barman-cloud-wal-archive --zstd --compression-level 1 (one process per segment: it has no
#     parallel or asynchronous mode), barman-cloud-backup --lz4 --jobs 4 (no zstd for backups),
#     barman-cloud-restore, barman-cloud-wal-restore --parallel 4 as restore_command.
#
# Knobs: TUSK_BENCH_PEERS_WAL_MIB (2048), TUSK_BENCH_PEERS_LAG_SECONDS (60),
# TUSK_BENCH_PEERS_SCALE (70), TUSK_BENCH_PEERS_REPLAY_MIB (1024), TUSK_BENCH_PEERS_TOOLS ("tusk
# walg pgbackrest barman"), TUSK_BENCH_PEERS_KEEP=1 keeps the work directory, TUSK_PG_BIN_DIR
# (/usr/lib/postgresql/15/bin). A small check: TUSK_BENCH_PEERS_WAL_MIB=256
# TUSK_BENCH_PEERS_SCALE=10 TUSK_BENCH_PEERS_LAG_SECONDS=20 TUSK_BENCH_PEERS_REPLAY_MIB=256
# scripts/bench-peers.sh 1
#
# Installs what it needs on first use: Debian's PostgreSQL and pgbackrest, WAL-G and MinIO (Go),
# barman (a virtualenv), all outside the repository (scripts/testbin.sh), and builds Tusk's
# binaries into CARGO_TARGET_DIR ($HOME/.cache/tusk-target). Runs as root (the servers and tools
# then run as postgres) or as the user PostgreSQL runs as.
set -euo pipefail
cd "$(dirname "$0")/.."

REPEATS="${1:-3}"
WAL_MIB="${TUSK_BENCH_PEERS_WAL_MIB:-2048}"
LAG_SECONDS="${TUSK_BENCH_PEERS_LAG_SECONDS:-60}"
SCALE="${TUSK_BENCH_PEERS_SCALE:-70}"
REPLAY_MIB="${TUSK_BENCH_PEERS_REPLAY_MIB:-1024}"
read -r -a TOOLS <<<"${TUSK_BENCH_PEERS_TOOLS:-tusk walg pgbackrest barman}"
PARALLEL=4

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

log "installing what is missing (first use takes minutes)"
scripts/install-deps.sh >&2
command -v openssl >/dev/null || scripts/apt-install.sh openssl openssl >&2
eval "$(scripts/testbin.sh minio walg pgbackrest barman)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tusk-target}"
log "building Tusk's binaries (release)"
cargo build --release --locked -q -p backup-agent -p tusk-instance
PGBIN="${TUSK_PG_BIN_DIR:-/usr/lib/postgresql/15/bin}"
[[ $("$PGBIN/postgres" --version) == *" 15."* ]] || { echo "$PGBIN is not PostgreSQL 15" >&2; exit 1; }

WORK=$(mktemp -d /tmp/tusk-bench-peers.XXXXXX)
chmod 755 "$WORK"
ROOT=0
[[ $(id -u) == 0 ]] && ROOT=1
as_pg() { if ((ROOT)); then runuser -u postgres -- "$@"; else "$@"; fi; }
# The prefix that starts a long-lived process as postgres in the background with the process
# itself (not a wrapper, nor a function's subshell) as $!.
AS_PG=()
((ROOT)) && AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups)
mine() { if ((ROOT)); then chown -R postgres: "$@"; fi; }
mine "$WORK"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

MINIO_PID=""
MANAGER_PID=""
RESTORE_PIDS=()
cleanup() {
  local status=$?
  set +e
  if ((status != 0)); then
    echo "--- failed; the logs' tails:" >&2
    for f in "$WORK"/*.log "$WORK"/pgbackrest/log/*.log; do
      [[ -f $f ]] && { echo "--- $f" >&2; tail -15 "$f" >&2; }
    done
  fi
  local pids=("${RESTORE_PIDS[@]}")
  [[ -n $MANAGER_PID ]] && pids+=("$MANAGER_PID")
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for dir in "$WORK"/restore-*/data; do
    [[ -f $dir/postmaster.pid ]] && as_pg "$PGBIN/pg_ctl" -D "$dir" -m immediate -w stop >/dev/null 2>&1
  done
  for _ in $(seq 1 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.2
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  # A manager killed hard leaves its postmaster: stop it too.
  for dir in "$WORK"/src/data "$WORK"/restore-*/data; do
    if [[ -f $dir/postmaster.pid ]]; then
      local pm
      pm=$(head -1 "$dir/postmaster.pid")
      [[ -n $pm ]] && kill -QUIT "$pm" 2>/dev/null
    fi
  done
  [[ -n $MINIO_PID ]] && kill "$MINIO_PID" 2>/dev/null && wait "$MINIO_PID" 2>/dev/null
  if [[ ${TUSK_BENCH_PEERS_KEEP:-0} == 1 ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# --- binaries the postgres user can run (the caches may sit in a private home) ---------------
mkdir -p "$WORK/bin"
"$CARGO_TARGET_DIR/release/tusk-instance" install "$WORK/bin/tusk-instance" \
  --with "$CARGO_TARGET_DIR/release/backup-agent" >/dev/null
install -m 755 "$TUSK_WALG_BIN" "$WORK/bin/wal-g"
cp -a "$(dirname "$TUSK_BARMAN_BIN_DIR")" "$WORK/barman"
mine "$WORK/bin" "$WORK/barman"

# --- MinIO over TLS (a CA and a certificate for 127.0.0.1 and localhost) ----------------------
CERTS="$WORK/certs"
mkdir -p "$CERTS"
(
  cd "$CERTS"
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 2 -subj /CN=bench-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  openssl req "${ec[@]}" -keyout private.key -out server.csr -subj /CN=localhost 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile server.ext -out public.crt 2>/dev/null
  chmod 644 ca.crt public.crt
)
CA="$CERTS/ca.crt"
S3PORT=$(free_port)
S3="https://127.0.0.1:$S3PORT"
S3_USER=benchadmin
S3_PASS=bench-secret-123
mkdir -p "$WORK/minio-data" "$WORK/minio-certs"
cp "$CERTS/public.crt" "$CERTS/private.key" "$WORK/minio-certs/"
MINIO_ROOT_USER=$S3_USER MINIO_ROOT_PASSWORD=$S3_PASS MINIO_BROWSER=off MINIO_UPDATE=off \
  "$TUSK_MINIO_BIN" --certs-dir "$WORK/minio-certs" server "$WORK/minio-data" \
  --address "127.0.0.1:$S3PORT" --console-address "127.0.0.1:$(free_port)" >"$WORK/minio.log" 2>&1 &
MINIO_PID=$!
s3() { curl -fsS --cacert "$CA" --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_USER:$S3_PASS" "$@"; }
for _ in $(seq 1 300); do
  curl -fs --cacert "$CA" "$S3/minio/health/ready" >/dev/null && break
  sleep 0.2
done
for bucket in tusk walg pgbackrest barman; do s3 -X PUT "$S3/$bucket" >/dev/null; done

# bucket_bytes BUCKET PREFIX: the bytes of every object under PREFIX (listed with boto3 from
# barman's virtualenv: curl's own S3 signing gets a listing's query string wrong, 403).
bucket_bytes() {
  AWS_ACCESS_KEY_ID=$S3_USER AWS_SECRET_ACCESS_KEY=$S3_PASS AWS_CA_BUNDLE=$CA "$WORK/barman/bin/python" -c '
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
pages = s3.get_paginator("list_objects_v2").paginate(Bucket=sys.argv[2], Prefix=sys.argv[3])
print(sum(o["Size"] for page in pages for o in page.get("Contents", [])))' "$S3" "$1" "$2"
}

# --- the source cluster, run by Tusk's instance manager ---------------------------------------
cat >"$WORK/pg_hba.conf" <<EOF
local all all trust
host all all 127.0.0.1/32 trust
local replication all trust
host replication all 127.0.0.1/32 trust
EOF
# Settings every server of the run shares (the source, and each restored one).
common_settings() {
  cat <<EOF
listen_addresses = '127.0.0.1'
hba_file = '$WORK/pg_hba.conf'
fsync = off
shared_buffers = 128MB
max_wal_size = 1GB
EOF
}
SRC_PORT=$(free_port)
SRC_STATUS=$(free_port)
SRC="$WORK/src"
mkdir -p "$SRC/run" "$SRC/tls"
# The manager's status port serves TLS with the files beside TUSK_CA_FILE and wants a token.
cp "$CA" "$SRC/tls/ca.crt" && cp "$CERTS/public.crt" "$SRC/tls/tls.crt" && cp "$CERTS/private.key" "$SRC/tls/tls.key"
STATUS_TOKEN=$(openssl rand -hex 16)
printf '%s' "$STATUS_TOKEN" >"$SRC/tls/token"
chmod 600 "$SRC/tls/tls.key" "$SRC/tls/token"
{
  common_settings
  echo "archive_mode = on"
  echo "archive_command = '$WORK/bin/tusk-instance wal-push %p'"
} >"$SRC/postgresql.conf"
printf '{"holder":"src-0","instances":"src-0","leaseDurationSeconds":6,"renew":true}' >"$WORK/lease.json"
chmod 666 "$WORK/lease.json"
mine "$SRC"
# What the agent and the manager need to reach the bucket (the operator's variables).
tusk_store_env() {
  local prefix=${1:-}
  printf '%s\n' "${prefix}TUSK_STORE=s3" "${prefix}TUSK_BUCKET=tusk" "${prefix}TUSK_S3_ENDPOINT=$S3" \
    "${prefix}TUSK_S3_FORCE_PATH_STYLE=true" "${prefix}TUSK_S3_CA_BUNDLE=$CA" \
    "${prefix}AWS_ACCESS_KEY_ID=$S3_USER" "${prefix}AWS_SECRET_ACCESS_KEY=$S3_PASS" \
    "${prefix}AWS_REGION=us-east-1" "${prefix}AWS_EC2_METADATA_DISABLED=true" \
    "${prefix}TUSK_NAMESPACE=bench" "${prefix}TUSK_CLUSTER=src"
}
# manager_env NAME HOME PORT STATUS_PORT LEASE: a manager's environment (as the Rust tests set it).
manager_env() {
  printf '%s\n' "PATH=$PGBIN:/usr/bin:/bin" "PGDATA=$2/data" "TUSK_POD_NAME=$1" \
    "TUSK_CONFIG_FILE=$2/postgresql.conf" "POSTGRES_PASSWORD=bench-pw" "TUSK_REPLICATION_PASSWORD=repl-pw" \
    "TUSK_STATUS_PORT=$4" "TUSK_PG_PORT=$3" "TUSK_SOCKET_DIR=$2/run" "TUSK_PG_BIN_DIR=$PGBIN" \
    "TUSK_PEER_HOSTS=$1=127.0.0.1:$3" "TUSK_CA_FILE=$2/tls/ca.crt" "TUSK_STATUS_TOKEN_FILE=$2/tls/token" "HOME=$2" "TUSK_ROLE_FILE=$5" \
    "RUST_LOG=info"
}
mapfile -t env_lines < <(manager_env src-0 "$SRC" "$SRC_PORT" "$SRC_STATUS" "$WORK/lease.json"; tusk_store_env)
"${AS_PG[@]}" env -i "${env_lines[@]}" "$WORK/bin/tusk-instance" run >"$WORK/manager.log" 2>&1 &
MANAGER_PID=$!
ready_primary() {
  curl -fs --cacert "$CA" -H "Authorization: Bearer $STATUS_TOKEN" "https://localhost:$1/status" 2>/dev/null |
    python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if s.get("role")=="primary" and s.get("ready") else 1)' 2>/dev/null
}
for _ in $(seq 1 600); do ready_primary "$SRC_STATUS" && break; sleep 0.2; done
ready_primary "$SRC_STATUS" || { echo "the source's manager never became a ready primary" >&2; exit 1; }
export PGHOST=127.0.0.1 PGUSER=postgres
sql() { "$PGBIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -p "$SRC_PORT" -d "${DB:-postgres}" -c "$1"; }
PGDATA_SRC="$SRC/data"
STATUS_DIR="$PGDATA_SRC/pg_wal/archive_status"
log "source: PostgreSQL $(sql 'SHOW server_version') on port $SRC_PORT (manager pid $MANAGER_PID); MinIO at $S3"

# --- the peers' configurations -----------------------------------------------------------------
cat >"$WORK/walg.env" <<EOF
AWS_ENDPOINT=$S3
AWS_S3_FORCE_PATH_STYLE=true
AWS_REGION=us-east-1
AWS_ACCESS_KEY_ID=$S3_USER
AWS_SECRET_ACCESS_KEY=$S3_PASS
WALG_S3_CA_CERT_FILE=$CA
WALG_S3_PREFIX=s3://walg/bench
WALG_COMPRESSION_METHOD=lz4
WALG_UPLOAD_CONCURRENCY=$PARALLEL
WALG_DOWNLOAD_CONCURRENCY=$PARALLEL
PGHOST=$SRC/run
PGPORT=$SRC_PORT
PGUSER=postgres
EOF
cat >"$WORK/walg.sh" <<EOF
#!/bin/sh
set -a
. '$WORK/walg.env'
set +a
exec '$WORK/bin/wal-g' "\$@"
EOF
mkdir -p "$WORK/pgbackrest/spool" "$WORK/pgbackrest/lock" "$WORK/pgbackrest/log"
# pgBackRest matches the host it dials (127.0.0.1: MinIO listens there alone) against the
# certificate's DNS names only, never its IP address: it does not verify this loopback one.
cat >"$WORK/pgbackrest.conf" <<EOF
[global]
repo1-type=s3
repo1-s3-endpoint=localhost
repo1-storage-host=127.0.0.1
repo1-storage-port=$S3PORT
repo1-storage-verify-tls=n
repo1-s3-bucket=pgbackrest
repo1-s3-region=us-east-1
repo1-s3-key=$S3_USER
repo1-s3-key-secret=$S3_PASS
repo1-s3-uri-style=path
repo1-path=/bench
repo1-retention-full=99
compress-type=zst
compress-level=1
process-max=$PARALLEL
archive-async=y
spool-path=$WORK/pgbackrest/spool
lock-path=$WORK/pgbackrest/lock
log-path=$WORK/pgbackrest/log
log-level-console=warn
log-level-file=info
start-fast=y

[db]
pg1-path=$PGDATA_SRC
pg1-port=$SRC_PORT
pg1-socket-path=$SRC/run
pg1-user=postgres
EOF
PGBR=("$TUSK_PGBACKREST_BIN" "--config=$WORK/pgbackrest.conf" --stanza=db)
BARMAN_URL="s3://barman/bench"
cat >"$WORK/barman.sh" <<EOF
#!/bin/sh
# barman.sh COMMAND ARGS: a barman-cloud command from the copied virtualenv.
export AWS_ACCESS_KEY_ID='$S3_USER' AWS_SECRET_ACCESS_KEY='$S3_PASS' AWS_DEFAULT_REGION=us-east-1 AWS_CA_BUNDLE='$CA'
command=\$1
shift
exec '$WORK/barman/bin/python' "$WORK/barman/bin/\$command" --endpoint-url '$S3' "\$@"
EOF
chmod 755 "$WORK/walg.sh" "$WORK/barman.sh"
chmod 644 "$WORK/walg.env" "$WORK/pgbackrest.conf"
mine "$WORK"
as_pg "${PGBR[@]}" stanza-create >/dev/null

archive_command_of() {
  case $1 in
    tusk) echo "$WORK/bin/tusk-instance wal-push %p" ;;
    walg) echo "$WORK/walg.sh wal-push %p" ;;
    pgbackrest) echo "${PGBR[*]} archive-push %p" ;;
    barman) echo "$WORK/barman.sh barman-cloud-wal-archive --zstd --compression-level 1 $BARMAN_URL db %p" ;;
  esac
}
restore_command_of() {
  case $1 in
    walg) echo "$WORK/walg.sh wal-fetch %f %p" ;;
    barman) echo "$WORK/barman.sh barman-cloud-wal-restore --parallel $PARALLEL --spool-dir $2/spool $BARMAN_URL db %f %p" ;;
  esac
}
# archive_with COMMAND: the source archives through COMMAND from now on ('' holds WAL back).
archive_with() {
  sql "ALTER SYSTEM SET archive_command = '$1'" && sql "SELECT pg_reload_conf()" >/dev/null
}
use_tool() { archive_with "$(archive_command_of "$1")"; }
ready_count() { find "$STATUS_DIR" -maxdepth 1 -name '*.ready' | wc -l; }
failures() { sql "SELECT failed_count FROM pg_stat_archiver"; }
# wait_archived SEGMENT: until no segment waits and SEGMENT (the last one closed) is archived;
# fails when the archive command has failed 3 times meanwhile (PostgreSQL's log says why).
wait_archived() {
  local last=$1 deadline=$((SECONDS + 3600)) failed checks=0
  failed=$(failures)
  until [[ $(ready_count) == 0 && (-e "$STATUS_DIR/$last.done" || ! -e "$PGDATA_SRC/pg_wal/$last") ]]; do
    ((SECONDS < deadline)) || { echo "segments still waiting for the archive after an hour" >&2; return 1; }
    if ((++checks % 20 == 0 && $(failures) >= failed + 3)); then
      echo "the archive command keeps failing: $(sql "SHOW archive_command")" >&2
      return 1
    fi
    sleep 0.1
  done
}
switch_wal() { sql "SELECT pg_walfile_name(pg_switch_wal())"; }
written_mib() { sql "SELECT (pg_wal_lsn_diff(pg_current_wal_lsn(), '$1') / 1048576)::bigint"; }
# tree_rss PID: the summed RSS (KiB) of PID and its descendants.
tree_rss() {
  ps -e -o pid=,ppid=,rss= | awk -v root="$1" '
    { parent[$1] = $2; rss[$1] = $3 }
    END { for (p in parent) { q = p; while (q in parent && q != root && q > 1) q = parent[q]; if (q == root) s += rss[p] } print s + 0 }'
}

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RESULTS"; log "  $1 $2: $3"; }

# --- setup: the pgbench database (WAL thrown away meanwhile) -----------------------------------
archive_with /bin/true
log "pgbench -i -s $SCALE (about $((SCALE * 15)) MiB)"
"$PGBIN/pgbench" -i -q -s "$SCALE" -p "$SRC_PORT" postgres >/dev/null 2>&1
sql "VACUUM ANALYZE" && sql "CHECKPOINT"
wait_archived "$(switch_wal)"
log "databases: $(($(sql "SELECT sum(pg_database_size(datname)) FROM pg_database") >> 20)) MiB"

# --- 1. WAL archive throughput on a backlog -----------------------------------------------------
throughput() {
  local tool=$1
  archive_with ""
  sql "CREATE TABLE junk (id bigint, pad text)"
  local start
  start=$(sql "SELECT pg_current_wal_lsn()")
  while (($(written_mib "$start") < WAL_MIB)); do
    sql "INSERT INTO junk SELECT g, md5(g::text) || md5(random()::text) FROM generate_series(1, 200000) g"
  done
  local last files t0 secs
  last=$(switch_wal)
  files=$(ready_count)
  t0=$(now)
  use_tool "$tool"
  wait_archived "$last"
  secs=$(since "$t0")
  record "$tool" throughput "$(awk -v f="$files" -v s="$secs" 'BEGIN { printf "%.1f", f * 16 / s }')"
  log "  ($files segments, $((files * 16)) MiB in $secs s)"
  sql "DROP TABLE junk" && sql "CHECKPOINT"
}

# --- 2. Archive lag under pgbench --------------------------------------------------------------
percentile() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int((NR - 1) * p + 0.5) + 1; print v[i] + 0 }'; }
lag() {
  local tool=$1
  use_tool "$tool"
  wait_archived "$(switch_wal)"
  local bulk="$WORK/bulk.sql" samples="$WORK/lag-$tool.samples" start
  echo "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) SELECT 1, 1, g, g, now() FROM generate_series(1, 2000) g;" >"$bulk"
  start=$(sql "SELECT pg_current_wal_lsn()")
  PGOPTIONS="-c synchronous_commit=off" "$PGBIN/pgbench" -p "$SRC_PORT" -b simple-update@9 -f "$bulk@1" \
    -c 8 -j 2 -T "$LAG_SECONDS" lag >"$WORK/pgbench-$tool.out" 2>"$WORK/pgbench.log" &
  local load=$!
  : >"$samples"
  while kill -0 "$load" 2>/dev/null; do
    ready_count >>"$samples"
    sleep 0.2
  done
  wait "$load"
  local mib
  mib=$(written_mib "$start")
  record "$tool" lag_p50 "$(percentile 0.5 <"$samples")"
  record "$tool" lag_p99 "$(percentile 0.99 <"$samples")"
  record "$tool" lag_max "$(percentile 1 <"$samples")"
  log "  ($(wc -l <"$samples") samples; $(grep -o 'tps = [0-9.]*' "$WORK/pgbench-$tool.out" | head -1), WAL $mib MiB in ${LAG_SECONDS} s)"
  wait_archived "$(switch_wal)"
  DB=lag sql "TRUNCATE pgbench_history" && DB=lag sql "VACUUM" && sql "CHECKPOINT"
}

# --- 3. Base backup ----------------------------------------------------------------------------
# backup_root TOOL ID: the bucket and the prefix of the tool's base backups (WAL not included).
backup_root() {
  case $1 in
    tusk) echo "tusk bench/src/$2/" ;;
    walg) echo "walg bench/basebackups_005/" ;;
    pgbackrest) echo "pgbackrest bench/backup/" ;;
    barman) echo "barman bench/db/base/" ;;
  esac
}
run_backup() {
  local tool=$1 id=$2
  case $tool in
    tusk)
      local env_lines
      mapfile -t env_lines < <(tusk_store_env)
      as_pg env "${env_lines[@]}" TUSK_PATH="" TUSK_PG_BIN_DIR="$PGBIN" PATH="$PGBIN:/usr/bin:/bin" \
        PGHOST=127.0.0.1 PGPORT="$SRC_PORT" PGUSER=postgres \
        "$WORK/bin/backup-agent" base-backup --backup-id "$id" --wal-wait-seconds 600 ;;
    walg) as_pg "$WORK/walg.sh" backup-push "$PGDATA_SRC" ;;
    pgbackrest) as_pg "${PGBR[@]}" --type=full backup ;;
    barman)
      as_pg "$WORK/barman.sh" barman-cloud-backup --lz4 --jobs "$PARALLEL" --immediate-checkpoint \
        -h "$SRC/run" -p "$SRC_PORT" -U postgres -n "$id" "$BARMAN_URL" db ;;
  esac
}
backup() {
  local tool=$1 id=$2 bucket prefix before
  read -r bucket prefix <<<"$(backup_root "$tool" "$id")"
  use_tool "$tool"
  wait_archived "$(switch_wal)"
  before=$(bucket_bytes "$bucket" "$prefix")
  local t0 peak=0 rss
  t0=$(now)
  run_backup "$tool" "$id" >"$WORK/backup-$tool.log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(tree_rss "$pid")
    ((rss > peak)) && peak=$rss
    sleep 0.2
  done
  wait "$pid" || { cat "$WORK/backup-$tool.log" >&2; return 1; }
  record "$tool" backup_s "$(since "$t0")"
  local after
  after=$(bucket_bytes "$bucket" "$prefix")
  record "$tool" backup_mib "$(awk -v a="$before" -v b="$after" 'BEGIN { printf "%.0f", (b - a) / 1048576 }')"
  record "$tool" backup_rss_mib "$((peak / 1024))"
}

# --- 4. Restore and replay to a target time ----------------------------------------------------
# restored_conf DIR PORT [TOOL TARGET]: the restored server's configuration (the source's
# shared settings; no archiving; the recovery settings of WAL-G and barman, whose restore
# commands write none).
restored_conf() {
  local dir=$1 port=$2 tool=${3:-} target=${4:-}
  common_settings
  echo "port = $port"
  echo "unix_socket_directories = '$dir/run'"
  echo "archive_mode = off"
  if [[ $tool == walg || $tool == barman ]]; then
    echo "restore_command = '$(restore_command_of "$tool" "$dir")'"
    echo "recovery_target_time = '$target'"
    echo "recovery_target_action = 'promote'"
  fi
}
promoted() { [[ $("$PGBIN/psql" -X -A -t -q -p "$1" -d postgres -c "SELECT pg_is_in_recovery()" 2>/dev/null) == f ]]; }
run_restore() {
  local tool=$1 id=$2 dir=$3 port=$4 target=$5 data="$3/data"
  case $tool in
    tusk)
      local status env_lines
      status=$(free_port)
      printf '{"holder":"rst-0","instances":"rst-0","leaseDurationSeconds":6,"renew":true}' >"$dir/lease.json"
      chmod 666 "$dir/lease.json"
      mapfile -t env_lines < <(manager_env rst-0 "$dir" "$port" "$status" "$dir/lease.json"; tusk_store_env RESTORE_)
      "${AS_PG[@]}" env -i "${env_lines[@]}" TUSK_RESTORE_BACKUP_ID="$id" TUSK_RESTORE_TARGET_TIME="$target" \
        TUSK_AGENT_BINARY="$WORK/bin/backup-agent" "$WORK/bin/tusk-instance" run >"$dir/manager.log" 2>&1 &
      RESTORE_PIDS+=($!)
      ;;
    walg)
      as_pg "$WORK/walg.sh" backup-fetch "$data" LATEST
      as_pg touch "$data/recovery.signal"
      ;;
    pgbackrest)
      as_pg "${PGBR[@]}" --pg1-path="$data" --type=time "--target=$target" --target-action=promote restore
      ;;
    barman)
      local backup
      backup=$(as_pg "$WORK/barman.sh" barman-cloud-backup-list --format json "$BARMAN_URL" db |
        python3 -c "import json,sys; print([b['backup_id'] for b in json.load(sys.stdin)['backups_list'] if b.get('backup_name') == '$id'][-1])")
      as_pg "$WORK/barman.sh" barman-cloud-restore "$BARMAN_URL" db "$backup" "$data"
      as_pg touch "$data/recovery.signal"
      ;;
  esac
  if [[ $tool != tusk ]]; then
    # Returns once the server accepts (read-only) connections: consistent, still replaying.
    as_pg "$PGBIN/pg_ctl" -D "$data" -l "$dir/postgres.log" -t 7200 -o "-c config_file=$dir/postgresql.conf" start >/dev/null
  fi
}
restore() {
  local tool=$1 id=$2
  use_tool "$tool"
  wait_archived "$(switch_wal)"
  # WAL after the backup: REPLAY_MIB of inserts, the target just after them, then a row past
  # the target that the restored server must not have.
  sql "CREATE TABLE filler (v text)" && sql "CREATE TABLE past_target (v int)"
  local start
  start=$(sql "SELECT pg_current_wal_lsn()")
  while (($(written_mib "$start") < REPLAY_MIB)); do
    sql "INSERT INTO filler SELECT repeat(md5(g::text), 30) FROM generate_series(1, 50000) g"
  done
  local rows target replayed
  rows=$(sql "SELECT count(*) FROM filler")
  replayed=$(written_mib "$start")
  target=$(sql "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00'")
  sleep 1
  sql "INSERT INTO past_target VALUES (1)"
  wait_archived "$(switch_wal)"

  local dir="$WORK/restore-$tool" port
  port=$(free_port)
  rm -rf "$dir" && mkdir -p "$dir/run" "$dir/spool" "$dir/data"
  chmod 700 "$dir/data"
  restored_conf "$dir" "$port" "$tool" "$target" >"$dir/postgresql.conf"
  mine "$dir"
  local t0
  t0=$(now)
  run_restore "$tool" "$id" "$dir" "$port" "$target" >"$dir/restore.log" 2>&1 || { cat "$dir/restore.log" >&2; return 1; }
  local deadline=$((SECONDS + 7200))
  until promoted "$port"; do
    ((SECONDS < deadline)) || { echo "$tool: the restored server did not promote" >&2; return 1; }
    sleep 0.2
  done
  record "$tool" restore_s "$(since "$t0")"
  local got past
  got=$("$PGBIN/psql" -X -A -t -q -p "$port" -d postgres -c "SELECT count(*) FROM filler")
  past=$("$PGBIN/psql" -X -A -t -q -p "$port" -d postgres -c "SELECT count(*) FROM past_target")
  [[ $got == "$rows" && $past == 0 ]] || { echo "$tool: restored $got rows of $rows, $past past the target" >&2; return 1; }
  log "  ($replayed MiB of WAL after the backup; $rows rows restored as at the target)"
  # Stop the restored server.
  if [[ $tool == tusk ]]; then
    local pid=${RESTORE_PIDS[-1]}
    kill -TERM "$pid"
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    unset 'RESTORE_PIDS[-1]'
  else
    as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
  fi
  rm -rf "$dir"
  sql "DROP TABLE filler" && sql "DROP TABLE past_target" && sql "CHECKPOINT"
}

# --- the runs ----------------------------------------------------------------------------------
for ((run = 1; run <= REPEATS; run++)); do
  # The tools' order rotates, so none always runs first (cold caches) or last.
  order=("${TOOLS[@]:$(((run - 1) % ${#TOOLS[@]}))}" "${TOOLS[@]:0:$(((run - 1) % ${#TOOLS[@]}))}")
  log "run $run of $REPEATS: ${order[*]}"
  for tool in "${order[@]}"; do log "throughput: $tool"; throughput "$tool"; done
  archive_with /bin/true
  sql "CREATE DATABASE lag"
  "$PGBIN/pgbench" -i -q -s 20 -p "$SRC_PORT" lag >/dev/null 2>&1
  for tool in "${order[@]}"; do log "lag: $tool"; lag "$tool"; done
  archive_with /bin/true
  sql "DROP DATABASE lag" && sql "CHECKPOINT"
  for tool in "${order[@]}"; do
    log "base backup and restore: $tool"
    backup "$tool" "r$run-$tool"
    restore "$tool" "r$run-$tool"
  done
done

# --- the table ---------------------------------------------------------------------------------
name_of() {
  case $1 in
    tusk) echo "Tusk" ;;
    walg) echo "WAL-G v0.2.20" ;;
    pgbackrest) echo "pgBackRest 2.45" ;;
    barman) echo "barman-cloud 3.19.1" ;;
  esac
}
measures=(
  "throughput|WAL archive throughput, ${WAL_MIB} MiB backlog (MiB/s, higher is better)"
  "lag_p50|archive lag p50 (.ready files, ${LAG_SECONDS} s pgbench)"
  "lag_p99|archive lag p99 (.ready files)"
  "lag_max|archive lag max (.ready files)"
  "backup_s|base backup, pgbench scale ${SCALE} (s)"
  "backup_mib|base backup stored (MiB)"
  "backup_rss_mib|base backup peak RSS (MiB)"
  "restore_s|restore + replay of ${REPLAY_MIB} MiB WAL to a target time (s)"
)
echo
echo "PostgreSQL $(sql 'SHOW server_version'), local MinIO (TLS), $(nproc) cores; $REPEATS run(s): median (min–max)"
echo
header="| measure |"
rule="|---|"
for tool in "${TOOLS[@]}"; do header+=" $(name_of "$tool") |"; rule+="---|"; done
echo "$header"
echo "$rule"
for entry in "${measures[@]}"; do
  key=${entry%%|*}
  row="| ${entry#*|} |"
  for tool in "${TOOLS[@]}"; do
    cell=$(awk -F'\t' -v t="$tool" -v k="$key" '$1 == t && $2 == k { print $3 }' "$RESULTS" | sort -g |
      awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "–"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        if (NR == 1) print m; else printf "%s (%s–%s)\n", m, v[1], v[NR] }')
    row+=" $cell |"
  done
  echo "$row"
done
