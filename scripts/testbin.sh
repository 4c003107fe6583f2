#!/usr/bin/env bash
# Builds (or reuses) the pinned upstream MinIO and fake-gcs-server used by backup-agent's tests.
# Binaries go to a cache outside the repository; nothing here is committed.
# Usage: eval "$(scripts/testbin.sh)"   # prints export lines on stdout, progress on stderr
set -euo pipefail

MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
FAKE_GCS_VERSION="v1.56.1"
CACHE="${TUSK_TESTBIN:-$HOME/.cache/tusk-testbin}"

command -v go >/dev/null || { echo "testbin.sh: Go toolchain not found (needed to build MinIO/fake-gcs-server)" >&2; exit 1; }

# build NAME VERSION MODULE: go install MODULE@VERSION into CACHE/NAME-VERSION/ unless present.
build() {
  local name=$1 version=$2 module=$3
  local dir="$CACHE/$name-$version"
  if [[ ! -x "$dir/$name" ]]; then
    echo "testbin.sh: building $module@$version (cold builds take minutes)..." >&2
    mkdir -p "$dir.tmp"
    # CGO off: static binaries, no C toolchain needed; the Go build cache is kept for reuse.
    CGO_ENABLED=0 GOBIN="$dir.tmp" GOFLAGS=-buildvcs=false go install -trimpath "$module@$version" >&2
    # go install names the binary after the module's last path element.
    if [[ "$(basename "$module")" != "$name" ]]; then mv "$dir.tmp/$(basename "$module")" "$dir.tmp/$name"; fi
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/$name"
}

minio=$(build minio "$MINIO_VERSION" github.com/minio/minio)
fakegcs=$(build fake-gcs-server "$FAKE_GCS_VERSION" github.com/fsouza/fake-gcs-server)
echo "export TUSK_MINIO_BIN=$minio"
echo "export TUSK_FAKE_GCS_BIN=$fakegcs"
