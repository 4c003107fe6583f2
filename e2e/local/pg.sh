#!/usr/bin/env bash
# psql against the local PostgreSQL that e2e/local/jobrunner.py runs for a Tusk cluster. As the
# superuser (the default): over the instance's socket, as `kubectl tusk psql` is in a pod — the
# superuser does not log in over the network (spec.superuserAccess is off). Tests seed and check
# data with it. TUSK_PG_SECRET=app connects as the application owner instead, over TCP with
# `<cluster>-app`'s username, password and database, the server verified as applications do:
# sslmode and ca.crt from the same Secret (the local server presents the cluster's certificate,
# which names localhost).
#   e2e/local/pg.sh NAMESPACE CLUSTER [psql args...]
#   e2e/local/pg.sh default shop -d shop -c 'SELECT count(*) FROM orders'
set -euo pipefail
ns=${1:?usage: pg.sh NAMESPACE CLUSTER [psql args...]}
cluster=${2:?usage: pg.sh NAMESPACE CLUSTER [psql args...]}
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kubectl=${TUSK_KUBECTL_BIN:-kubectl}
port=$(python3 "$here/jobrunner.py" port "$ns" "$cluster")
which=${TUSK_PG_SECRET:-superuser}
bin=${TUSK_PG_BIN_DIR:-$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin | sort -V | tail -1)}
if [[ "$which" == superuser ]]; then
  socket=$(python3 "$here/jobrunner.py" socket "$ns" "$cluster")
  exec "$bin/psql" -X -v ON_ERROR_STOP=1 -h "$socket" -p "$port" -U postgres -d postgres "$@"
fi
secret() {
  "$kubectl" -n "$ns" get secret "$cluster-$which" -o "jsonpath={.data.$1}" | base64 -d
}
user=$(secret username)
PGPASSWORD=$(secret password)
export PGPASSWORD
db=$(secret dbname)
host=127.0.0.1
if [[ -n "$(secret ca\\.crt)" ]]; then
  ca=$(mktemp)
  trap 'rm -f "$ca"' EXIT
  secret ca\\.crt >"$ca"
  PGSSLMODE=$(secret sslmode) PGSSLROOTCERT=$ca PGHOSTADDR=127.0.0.1
  export PGSSLMODE PGSSLROOTCERT PGHOSTADDR
  host=localhost
fi
"$bin/psql" -X -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U "$user" -d "$db" "$@"
