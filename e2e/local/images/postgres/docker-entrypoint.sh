#!/bin/bash
# The first-start contract of the official postgres image, as far as Tusk relies on it (see the
# Containerfile). Written for the test stand-in; not a copy of the official script.
set -euo pipefail

if [[ "${1:-}" == -* ]]; then set -- postgres "$@"; fi
if [[ "${1:-}" != postgres ]]; then exec "$@"; fi
if [[ $(id -u) == 0 ]]; then
  echo "docker-entrypoint.sh: this test image runs as uid 999 only (set runAsUser)" >&2
  exit 1
fi

: "${PGDATA:?PGDATA must be set}"
export POSTGRES_USER=${POSTGRES_USER:-postgres}

if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set on first start}"
  mkdir -p "$PGDATA"
  chmod 0700 "$PGDATA"
  # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of arguments
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
    ${POSTGRES_INITDB_ARGS:-}
  # A server on the socket only, with the caller's settings, for the first-start scripts.
  pg_ctl --pgdata="$PGDATA" --wait --silent \
    --options="$(printf '%q ' "${@:2}") -c listen_addresses=''" start
  export PGUSER=$POSTGRES_USER PGPASSWORD=$POSTGRES_PASSWORD PGHOST=/var/run/postgresql
  for f in /docker-entrypoint-initdb.d/*; do
    case $f in
      *.sh)
        if [[ -x "$f" ]]; then echo "running $f"; "$f"; else echo "sourcing $f"; # shellcheck disable=SC1090
          . "$f"; fi ;;
      *.sql) echo "running $f"; psql -v ON_ERROR_STOP=1 --no-psqlrc --dbname postgres -f "$f" ;;
      *) if [[ -e "$f" ]]; then echo "ignoring $f"; fi ;;
    esac
  done
  unset PGUSER PGPASSWORD PGHOST
  pg_ctl --pgdata="$PGDATA" --wait --silent --mode=fast stop
  echo "first start done; starting PostgreSQL"
fi
exec "$@"
