#!/usr/bin/env bash
# Installs the system packages the tests need, when they are missing: Debian's PostgreSQL
# server and client (initdb, pg_ctl, pg_dump, pg_restore, psql) and util-linux's runuser.
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v pg_dump >/dev/null || missing+=(postgresql-client)
command -v runuser >/dev/null || missing+=(util-linux)

if ((${#missing[@]} == 0)); then
  echo "system packages present"
  exit 0
fi
echo "installing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
