#!/usr/bin/env bash
# Installs the system packages the tests need, when they are missing: Debian's PostgreSQL
# server and client (initdb, pg_ctl, pg_dump, pg_restore, psql), util-linux's runuser and
# openssl (verifies the certificates of a CA rotation as libpq's OpenSSL does).
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v pg_dump >/dev/null || missing+=(postgresql-client)
command -v runuser >/dev/null || missing+=(util-linux)
command -v openssl >/dev/null || missing+=(openssl)

exec "$(dirname "$0")/apt-install.sh" "system packages" "${missing[@]}"
