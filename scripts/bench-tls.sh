#!/usr/bin/env bash
# What TLS costs a client of Tusk, on this machine: pgbench TPS and connection setup through one
# PostgreSQL, without TLS and with Tusk's settings (TLS 1.3 only, an ECDSA P-256 certificate
# signed by a cluster CA, the client verifying it by name with verify-full and channel binding
# required), the two interleaved in the same run so that both see the same machine.
#   scripts/bench-tls.sh [ROUNDS [SECONDS]]      # defaults: 3 rounds of 20 s, each workload, each way
# TUSK_BENCH_TLS_PIN=1 runs PostgreSQL on CPU 0 and pgbench on CPU 1 (taskset): the client's TLS
# then no longer takes the server's CPU, as with clients on other machines.
# Prints one line per round and a summary: TPS ratio (goal ≥ 90 %) and the connection setup p50.
set -euo pipefail
# PostgreSQL refuses root: the whole benchmark runs as the postgres user then.
if [[ $(id -u) == 0 ]]; then
  exec runuser -u postgres -- bash -c "$(cat "$0")" bench-tls.sh "$@"
fi
rounds=${1:-3}
seconds=${2:-20}
clients=${TUSK_BENCH_TLS_CLIENTS:-4}
connections=${TUSK_BENCH_TLS_CONNECTIONS:-200}
bin=${TUSK_PG_BIN_DIR:-$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin | sort -V | tail -1)}
command -v openssl >/dev/null || { echo "bench-tls: needs openssl (apt-get install openssl)" >&2; exit 2; }

dir=$(mktemp -d /tmp/tusk-bench-tls.XXXXXX)
chmod 0755 "$dir"
cleanup() {
  "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

# A CA and a server certificate for localhost, as the operator issues them (ECDSA P-256).
tls() { openssl "$@" 2>/dev/null; }
tls req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=bench CA" \
  -keyout "$dir/ca.key" -out "$dir/ca.crt"
tls req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout "$dir/server.key" -out "$dir/server.csr"
printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$dir/ext"
tls x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days 30 -extfile "$dir/ext" -out "$dir/server.crt"
chmod 0600 "$dir/server.key"

password=$(openssl rand -hex 16)
printf '%s\n' "$password" >"$dir/pwfile"
"$bin/initdb" -D "$dir/data" -U postgres --pwfile="$dir/pwfile" --auth-local=trust \
  --auth-host=scram-sha-256 >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 50
shared_buffers = 128MB
ssl = on
ssl_cert_file = '$dir/server.crt'
ssl_key_file = '$dir/server.key'
ssl_min_protocol_version = 'TLSv1.3'
EOF
# Both kinds of connection from 127.0.0.1 with SCRAM: the only difference is TLS.
printf 'local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n' >"$dir/data/pg_hba.conf"
server_cpu=() client_cpu=()
if [[ "${TUSK_BENCH_TLS_PIN:-0}" == 1 ]]; then server_cpu=(taskset -c 0); client_cpu=(taskset -c 1); fi
"${server_cpu[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
"$bin/pgbench" -h "$dir" -p "$port" -U postgres -i -q -s 10 postgres >/dev/null 2>&1

export PGHOST=localhost PGHOSTADDR=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
export PGPASSWORD=$password
plain() { PGSSLMODE=disable "$@"; }
verified() {
  PGSSLMODE=verify-full PGSSLROOTCERT="$dir/ca.crt" PGCHANNELBINDING=require "$@"
}
# TPS without the initial connection time, from one pgbench run of builtin script $workload.
tps() {
  "$@" "${client_cpu[@]}" "$bin/pgbench" -n -b "$workload" -c "$clients" -j 2 -T "$seconds" 2>&1 |
    sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p'
}
# Connection setup, one connection per pgbench run, as pgbench measures it (ms).
connect_ms() {
  printf 'SELECT 1;\n' >"$dir/select1.sql"
  for _ in $(seq "$connections"); do
    "$@" "$bin/pgbench" -n -C -c 1 -t 1 -f "$dir/select1.sql" 2>&1 |
      sed -n 's/^average connection time = \([0-9.]*\) ms$/\1/p'
  done | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}

# The TLS session really is TLS 1.3 with the certificate verified.
verified "$bin/psql" -X -A -t -c "SELECT 'session: ' || version || ' ' || cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()"

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
summaries=()
# TPC-B writes (what applications mostly pay for: fsync-bound) and select-only (the most
# TLS-bound: a round trip per statement, nothing else).
for workload in tpcb-like select-only; do
  echo "$workload: round  plain_tps  tls_tps  ratio"
  ratios=(); plain_all=(); tls_all=()
  for round in $(seq "$rounds"); do
    p=$(tps plain); t=$(tps verified)
    r=$(awk -v p="$p" -v t="$t" 'BEGIN {printf "%.3f", t / p}')
    printf '%s: %5s  %9s  %7s  %5s\n' "$workload" "$round" "$p" "$t" "$r"
    ratios+=("$r"); plain_all+=("$p"); tls_all+=("$t")
  done
  range="$(printf '%s\n' "${ratios[@]}" | sort -n | head -1)–$(printf '%s\n' "${ratios[@]}" | sort -n | tail -1)"
  summaries+=("$workload tps: plain median $(median "${plain_all[@]}"), TLS median $(median "${tls_all[@]}"), TLS/plain median $(median "${ratios[@]}") (range $range); goal >= 0.90")
done
plain_p50=$(connect_ms plain)
tls_p50=$(connect_ms verified)
echo "summary: clients=$clients seconds=$seconds rounds=$rounds pinned=${TUSK_BENCH_TLS_PIN:-0}"
printf '%s\n' "${summaries[@]}"
echo "connection setup p50 over $connections connections: plain ${plain_p50} ms, TLS ${tls_p50} ms"
