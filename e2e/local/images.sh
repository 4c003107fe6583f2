#!/usr/bin/env bash
# Builds the container images for the real node (e2e/local/node.sh) with podman, without a
# registry: base images from Debian packages (mmdebstrap), tagged with the names our Dockerfile
# uses, then our two images from the Dockerfile itself, a PostgreSQL test stand-in and MinIO.
#
#   e2e/local/images.sh [base|tusk|postgres|postgres17|pgbouncer|minio|all]...   (default: all)
#   e2e/local/images.sh load    # copy them into the node's containerd (k8s.io namespace)
#
# Every image carries the label tusk.inputs=<sha256 of what it is built from>; an image whose
# label matches is not rebuilt, so a warm run costs a few hashes.
#
# | image                                   | built from                                          |
# |-----------------------------------------|-----------------------------------------------------|
# | docker.io/library/debian:bookworm-slim  | mmdebstrap --variant=minbase bookworm               |
# | gcr.io/distroless/cc-debian12:nonroot   | the Debian base + user nonroot (65532); stand-in    |
# | docker.io/library/rust:1.95-bookworm    | Debian + gcc/make + the host's Rust 1.95 toolchain  |
# |   (only with TUSK_IMAGE_BINARIES=source, the default)                                          |
# | ghcr.io/tusk-operator/tusk:e2e          | Dockerfile --target operator                        |
# | ghcr.io/tusk-operator/backup-agent:e2e  | Dockerfile --target backup-agent, PG_APT=debian     |
#
# TUSK_IMAGE_BINARIES=host builds our two images from binaries this host's cargo compiled
# (Dockerfile BINARIES=prebuilt): minutes instead of the ~60 of a cold build in a container.
# | localhost/tusk-test/postgres:15         | e2e/local/images/postgres (Debian's PostgreSQL 15)  |
# | docker.io/library/debian:trixie-slim    | mmdebstrap --variant=minbase trixie                 |
# | localhost/tusk-test/postgres:17         | e2e/local/images/postgres on trixie (PostgreSQL 17) |
# | localhost/tusk-test/pgbouncer:e2e       | e2e/local/images/pgbouncer (Debian's pgbouncer)     |
# | localhost/tusk-test/minio:e2e           | e2e/local/images/minio (binary from binaries.sh)    |
# | localhost/tusk-test/pause:e2e           | the Debian base running sleep (the pod sandbox)     |
#
# The stand-ins exist only on this machine; users with Docker and a registry pull the real ones.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
log() { echo "images.sh: $*" >&2; }

RUST_VERSION=${RUST_VERSION:-1.95}
DEBIAN_SUITE=bookworm
CACHE=${TUSK_IMAGE_CACHE:-$HOME/.cache/tusk-images}
mkdir -p "$CACHE"

# Debian's podman 4.3 with Debian's runc (crun refuses this machine's hybrid cgroups); the hard
# open-files limit here is 20000, below podman's default for containers.
pm() { podman --runtime /usr/sbin/runc "$@"; }
ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=4096:4096)

inputs_of() { pm image inspect --format '{{index .Labels "tusk.inputs"}}' "$1" 2>/dev/null || true; }
fresh() { [[ "$(inputs_of "$1")" == "$2" ]]; }
sha() { sha256sum | cut -c1-16; }
timed() { local t=$SECONDS; "$@"; log "${TIMED_AS:-$1} took $((SECONDS - t))s"; }

# rootfs NAME INCLUDES [HOOK...]: an mmdebstrap minbase tarball in $CACHE. Hooks are shell
# snippets mmdebstrap runs with the root directory as $1. SUITE (default bookworm) picks Debian's.
# shellcheck disable=SC2016
rootfs() {
  local name=$1 include=$2 suite=${SUITE:-$DEBIAN_SUITE}; shift 2
  local out="$CACHE/$name.tar"
  mmdebstrap --quiet --variant=minbase --include="$include" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    --customize-hook='rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/usr/share/locale/*' \
    "$@" "$suite" "$out.tmp.tar" >&2
  mv "$out.tmp.tar" "$out"
}

# base_debian [SUITE]: docker.io/library/debian:<suite>-slim.
base_debian() {
  local suite=${1:-$DEBIAN_SUITE}
  local tag=docker.io/library/debian:$suite-slim
  local inputs; inputs=$(printf 'debian-v1 %s ca-certificates' "$suite" | sha)
  fresh "$tag" "$inputs" && return
  log "$tag from Debian packages"
  SUITE=$suite rootfs "debian-$suite" ca-certificates
  pm import --change "LABEL tusk.inputs=$inputs" --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$CACHE/debian-$suite.tar" "$tag" >/dev/null
  rm -f "$CACHE/debian-$suite.tar"
}

# distroless/cc has glibc, libgcc, libssl and CA certificates, no shell needed by us; the
# Debian base has all of them. User nonroot is 65532 as in distroless.
base_distroless() {
  local tag=gcr.io/distroless/cc-debian12:nonroot
  local from; from=$(pm image inspect --format '{{.Id}}' docker.io/library/debian:bookworm-slim)
  local inputs; inputs=$(printf 'distroless-v1 %s' "$from" | sha)
  fresh "$tag" "$inputs" && return
  log "$tag (stand-in) from the Debian base"
  pm build "${ULIMITS[@]}" --quiet --label "tusk.inputs=$inputs" -t "$tag" -f - "$CACHE" >/dev/null <<'CF'
FROM docker.io/library/debian:bookworm-slim
RUN echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >>/etc/passwd \
 && echo 'nonroot:x:65532:' >>/etc/group && mkdir -p /home/nonroot && chown 65532:65532 /home/nonroot
USER 65532:65532
WORKDIR /home/nonroot
CF
}

# The official rust image: buildpack-deps (gcc, make, git, curl, pkg-config) plus rustup's
# toolchain in /usr/local/cargo/bin. Here: Debian's packages plus the host's toolchain of the
# same version (no rustup inside; the build uses only cargo and rustc).
# shellcheck disable=SC2016
base_rust() {
  local tag=docker.io/library/rust:${RUST_VERSION}-bookworm
  local toolchain; toolchain=$(rustc +"$RUST_VERSION" --print sysroot 2>/dev/null || rustc --print sysroot)
  local version; version=$("$toolchain/bin/rustc" --version)
  [[ "$version" == "rustc $RUST_VERSION."* ]] || { log "no Rust $RUST_VERSION toolchain on this host ($version)"; return 1; }
  local inputs; inputs=$(printf 'rust-v1 %s %s' "$DEBIAN_SUITE" "$version" | sha)
  fresh "$tag" "$inputs" && return
  log "$tag from Debian packages and $toolchain ($version)"
  rootfs rust ca-certificates,curl,git,gcc,g++,libc6-dev,make,pkg-config,libssl-dev,cmake,clang \
    --customize-hook="mkdir -p \"\$1/usr/local/rust\" \"\$1/usr/local/cargo/bin\" && cp -a '$toolchain/bin' '$toolchain/lib' \"\$1/usr/local/rust/\"" \
    --customize-hook='for b in cargo rustc rustdoc; do ln -s ../../rust/bin/$b "$1/usr/local/cargo/bin/$b"; done'
  pm import --change "LABEL tusk.inputs=$inputs" --change 'CMD ["bash"]' \
    --change 'ENV CARGO_HOME=/usr/local/cargo' \
    --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$CACHE/rust.tar" "$tag" >/dev/null
  rm -f "$CACHE/rust.tar"
}

# The Rust base only when the Dockerfile compiles (TUSK_IMAGE_BINARIES=source).
base() {
  timed base_debian; timed base_distroless
  if [[ ${TUSK_IMAGE_BINARIES:-source} == source ]]; then timed base_rust; fi
}

# The content hash of the tracked files (with uncommitted changes) the Dockerfile copies.
tree_hash() {
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard | grep -zv '^e2e/' \
    | xargs -0 sha256sum 2>/dev/null) | sha
}

# The crates of Cargo.lock, vendored on the host (which reaches crates.io) into the cache: build
# containers here cannot verify crates.io's TLS chain, so the Dockerfile's cargo reads them from a
# read-only volume instead, through a cargo config mounted into CARGO_HOME. Keyed by Cargo.lock.
vendor_crates() {
  local lock; lock=$(sha <"$repo/Cargo.lock")
  VENDOR="$CACHE/vendor-$lock"
  if [[ ! -d "$VENDOR" ]]; then
    log "cargo vendor into $VENDOR"
    rm -rf "$CACHE"/vendor-* "$CACHE/vendor.tmp"
    (cd "$repo" && cargo vendor --locked --versioned-dirs "$CACHE/vendor.tmp" >/dev/null)
    mv "$CACHE/vendor.tmp" "$VENDOR"
  fi
  printf '[source.crates-io]\nreplace-with = "vendored-sources"\n\n[source.vendored-sources]\ndirectory = "/vendor"\n' \
    >"$CACHE/cargo-config.toml"
}

# The three binaries built on this host (a Debian bookworm, as the images) with cargo's
# $TUSK_IMAGE_PROFILE (dev: what CI's test run has just compiled), debug info stripped, in
# $1/prebuilt/ for the Dockerfile's BINARIES=prebuilt.
host_binaries() {
  local ctx=$1 profile=${TUSK_IMAGE_PROFILE:-dev} dir
  (cd "$repo" && cargo build --locked --profile "$profile" -p tusk -p backup-agent -p tusk-instance >&2)
  dir="${CARGO_TARGET_DIR:-$repo/target}/$([[ $profile == dev ]] && echo debug || echo "$profile")"
  mkdir -p "$ctx/prebuilt"
  for bin in tusk backup-agent tusk-instance; do
    objcopy --strip-debug "$dir/$bin" "$ctx/prebuilt/$bin"
  done
}

# TUSK_IMAGE_BINARIES=source (default) compiles inside the build (the Dockerfile as users run it:
# ~60 min cold here); =host takes them from this host's cargo (host_binaries: a few minutes when
# the target directory is warm, which is how CI runs the real-node suite).
tusk_images() {
  local from=${TUSK_IMAGE_BINARIES:-source} context=$repo ctx="" rust="" distroless debian
  local args=(--build-arg "RUST_VERSION=$RUST_VERSION")
  if [[ $from == host ]]; then
    ctx=$(mktemp -d)
    host_binaries "$ctx"
    context=$ctx
    args+=(--build-arg BINARIES=prebuilt)
    rust=$( (cd "$ctx/prebuilt" && sha256sum tusk backup-agent tusk-instance) | sha)
  else
    vendor_crates
    rust=$(pm image inspect --format '{{.Id}}' "docker.io/library/rust:${RUST_VERSION}-bookworm")
    rust="$(tree_hash) $rust"
    args+=(--volume "$VENDOR:/vendor:ro" --volume "$CACHE/cargo-config.toml:/usr/local/cargo/config.toml:ro")
  fi
  distroless=$(pm image inspect --format '{{.Id}}' gcr.io/distroless/cc-debian12:nonroot)
  debian=$(pm image inspect --format '{{.Id}}' docker.io/library/debian:bookworm-slim)
  local inputs; inputs=$(printf 'tusk-v2 %s %s %s %s' "$from" "$rust" "$distroless" "$debian" | sha)
  # Debian bookworm's own client (15) instead of the PostgreSQL project's repository, which
  # this machine cannot reach; it dumps the test image's PostgreSQL 15.
  args+=(--build-arg PG_APT=debian --build-arg PG_MAJOR=15)
  for target in operator backup-agent; do
    local tag=ghcr.io/tusk-operator/tusk:e2e
    [[ $target == backup-agent ]] && tag=ghcr.io/tusk-operator/backup-agent:e2e
    fresh "$tag" "$inputs" && continue
    log "$tag from the Dockerfile (--target $target)"
    # --network=host: the build's apt-get reaches Debian's archive through the host.
    # --pull=never: the bases above are local only.
    TIMED_AS="$tag" timed pm build "${ULIMITS[@]}" --network=host --pull=never --layers "${args[@]}" \
      --label "tusk.inputs=$inputs" --target "$target" -t "$tag" -f "$repo/Dockerfile" "$context" >&2
  done
  if [[ -n $ctx ]]; then rm -rf "$ctx"; fi
}

# postgres_image [MAJOR]: the stand-in of postgres:<major> from the Debian suite that ships that
# major (15: bookworm, the suite of every other image; 17: trixie, for major-version upgrades).
postgres_image() {
  local major=${1:-15} suite
  case $major in
    15) suite=bookworm ;;
    17) suite=trixie; timed base_debian trixie ;;
    *) log "no Debian suite here ships PostgreSQL $major"; return 1 ;;
  esac
  local tag=localhost/tusk-test/postgres:$major dir="$here/images/postgres"
  local debian; debian=$(pm image inspect --format '{{.Id}}' "docker.io/library/debian:$suite-slim")
  local inputs; inputs=$( (cat "$dir"/*; echo "$debian $major") | sha)
  fresh "$tag" "$inputs" && return
  log "$tag (test stand-in) from Debian $suite's postgresql-$major"
  pm build "${ULIMITS[@]}" --network=host --pull=never --label "tusk.inputs=$inputs" \
    --build-arg "SUITE=$suite" --build-arg "PG_MAJOR=$major" -t "$tag" "$dir" >&2
}

pgbouncer_image() {
  local tag=localhost/tusk-test/pgbouncer:e2e dir="$here/images/pgbouncer"
  local debian; debian=$(pm image inspect --format '{{.Id}}' docker.io/library/debian:bookworm-slim)
  local inputs; inputs=$( (cat "$dir"/*; echo "$debian") | sha)
  fresh "$tag" "$inputs" && return
  log "$tag (test stand-in) from Debian's pgbouncer"
  pm build "${ULIMITS[@]}" --network=host --pull=never --label "tusk.inputs=$inputs" -t "$tag" "$dir" >&2
}

minio_image() {
  local tag=localhost/tusk-test/minio:e2e dir="$here/images/minio"
  local bin; bin=$(compgen -G "${TUSK_TESTBIN:-$HOME/.cache/tusk-testbin}/minio-*/minio" | head -n1 || true)
  [[ -x "$bin" ]] || { log "no MinIO binary in ~/.cache/tusk-testbin (scripts/test.sh builds it)"; return 1; }
  local debian; debian=$(pm image inspect --format '{{.Id}}' docker.io/library/debian:bookworm-slim)
  local inputs; inputs=$( (cat "$dir"/* "$bin"; echo "$debian") | sha)
  fresh "$tag" "$inputs" && return
  log "$tag from $bin"
  local ctx; ctx=$(mktemp -d)
  cp "$dir"/* "$bin" "$ctx/"
  pm build "${ULIMITS[@]}" --pull=never --label "tusk.inputs=$inputs" -t "$tag" "$ctx" >&2
  rm -rf "$ctx"
}


# The pod sandbox ("pause") image of the node's containerd: the Debian base sleeping.
pause_image() {
  local tag=localhost/tusk-test/pause:e2e
  local debian; debian=$(pm image inspect --format '{{.Id}}' docker.io/library/debian:bookworm-slim)
  local inputs; inputs=$(printf 'pause-v1 %s' "$debian" | sha)
  fresh "$tag" "$inputs" && return
  pm build "${ULIMITS[@]}" --quiet --pull=never --label "tusk.inputs=$inputs" -t "$tag" -f - "$CACHE" >/dev/null <<'CF'
FROM docker.io/library/debian:bookworm-slim
ENTRYPOINT ["/bin/sleep", "infinity"]
CF
}

IMAGES=(localhost/tusk-test/pause:e2e ghcr.io/tusk-operator/tusk:e2e ghcr.io/tusk-operator/backup-agent:e2e
  localhost/tusk-test/postgres:15 localhost/tusk-test/postgres:17 localhost/tusk-test/minio:e2e
  localhost/tusk-test/pgbouncer:e2e)

# load: podman save -> ctr import into the node's containerd (namespace k8s.io), skipping images
# whose podman id was loaded before (a stamp beside the socket).
load() {
  local sock=${TUSK_CONTAINERD_SOCK:?TUSK_CONTAINERD_SOCK (from the node env) is not set}
  local stamps; stamps="$(dirname "$sock")/loaded"
  mkdir -p "$stamps"
  for img in "${IMAGES[@]}"; do
    local id stamp
    id=$(pm image inspect --format '{{.Id}}' "$img" 2>/dev/null) || { log "not built yet, not loaded: $img"; continue; }
    stamp="$stamps/$(echo "$img" | tr '/:' '__')"
    [[ -f "$stamp" && "$(<"$stamp")" == "$id" ]] && continue
    log "loading $img into containerd"
    pm save --format docker-archive "$img" | ctr --address "$sock" -n k8s.io images import - >/dev/null
    echo "$id" >"$stamp"
  done
}

[[ $# -gt 0 ]] || set -- all
for what in "$@"; do
  case $what in
    base) base; timed pause_image ;;
    tusk) tusk_images ;;
    postgres) timed postgres_image 15 ;;
    postgres17) timed postgres_image 17 ;;
    pgbouncer) timed pgbouncer_image ;;
    minio) timed minio_image ;;
    all) base; timed pause_image; timed postgres_image 15; timed postgres_image 17; timed pgbouncer_image
      timed minio_image; tusk_images ;;
    load) timed load ;;
    *) log "unknown: $what"; exit 2 ;;
  esac
done
