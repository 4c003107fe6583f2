#!/usr/bin/env bash
# The scale benchmark: for each N[:NAMESPACES] (default: 100 1000 1000:50), a fresh local control
# plane with kwok playing the nodes (e2e/local/up.sh), the release operator as a process with
# its ServiceAccount's RBAC (e2e/local/operator.sh), then `tusk-scale` applies N clusters at once
# and prints what it measured (e2e/src/scale/). Tables go to stdout and to $TUSK_SCALE_OUT.
# TUSK_SCALE_PROFILE=debug measures the workspace's test build instead (CI's short run, with
# the binaries its tests were built with, scripts/workspace-tests.sh: it proves the benchmark
# works without a release build; its figures are not the product's).
# TUSK_SCALE_CACHE_MEMORY=1 adds the heap each cached kind holds (tusk-cache-memory).
# TUSK_SCALE_OPERATOR_BIN=PATH measures that operator binary instead (before/after comparisons).
# TUSK_SCALE_OPERATORS="tusk cnpg zalando" measures the peers too, each on a fresh control plane
# of its own (e2e/local/peer.sh runs them; scripts/testbin.sh builds them on first use); the
# default is Tusk alone. A peer on kwok may never be ready in its own terms: tusk-scale waits
# TUSK_SCALE_READY_TIMEOUT seconds (default 600) for that, then reports how far it got (Tusk
# must get there: the run fails otherwise).
# TUSK_SCALE_TIMEOUT (seconds, default 1800) bounds every phase; 10,000 clusters need more.
# TUSK_SCALE_DELETE_TIMEOUT (seconds, default TUSK_SCALE_TIMEOUT) bounds the wait for the
# garbage collector after the delete, then reports what is left instead of failing.
# TUSK_SCALE_BACKLOG=M: after the restart at rest, M more clusters are applied and the operator
# is restarted again while they are being created (how long until it has been through as many
# clusters as had converged: converged clusters must not wait behind new ones).
# TUSK_SCALE_ONLY_RW=1: Tusk's clusters with -rw as their only client Service
# (spec.services.disabled: [ro, r]): one ClusterIP a cluster instead of three.
#   scripts/bench-scale.sh [--rest SECONDS] [N[:NAMESPACES]...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rest=600
if [[ "${1:-}" == --rest ]]; then rest=$2; shift 2; fi
runs=("$@")
((${#runs[@]})) || runs=(100 1000 1000:50)
out=${TUSK_SCALE_OUT:-$(mktemp /tmp/tusk-scale.XXXXXX.md)}

profile=${TUSK_SCALE_PROFILE:-release}
# built NAME: the path of binary NAME in the chosen profile, built first.
case "$profile" in
  release)
    built() {
      local package=()
      if [[ "$1" != tusk ]]; then package=(-p tusk-e2e); fi
      (cd "$repo" && cargo build --locked --quiet --release "${package[@]}" --bin "$1")
      echo "$target/release/$1"
    } ;;
  debug) built() { "$repo/scripts/workspace-tests.sh" bin "$1"; } ;;
  *) echo "bench-scale.sh: TUSK_SCALE_PROFILE is release or debug, not $profile" >&2; exit 2 ;;
esac
target=$(cd "$repo" && cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
read -r -a operators <<<"${TUSK_SCALE_OPERATORS:-tusk}"
operator=${TUSK_SCALE_OPERATOR_BIN:-}
echo "==> building: ${operator:+not }the operator ($profile) and tusk-scale" >&2
peers=()
for op in "${operators[@]}"; do
  case "$op" in
    tusk) ;;
    cnpg | zalando) peers+=("$op") ;;
    *) echo "bench-scale.sh: TUSK_SCALE_OPERATORS holds tusk, cnpg, zalando, not $op" >&2; exit 2 ;;
  esac
done
if ((${#peers[@]})); then eval "$("$repo/scripts/testbin.sh" "${peers[@]}")"; fi
# Copies, taken as each is built: the target directory may be shared, and another build there
# must not swap the binaries between (or during) runs. The benchmark's own watcher is in the
# operator's profile: a debug build of it took ~40 % of a core at 10,000 clusters, on the
# machine whose API server it measures.
bins=$(mktemp -d /tmp/tusk-scale-bin.XXXXXX)
if [[ " ${operators[*]} " == *" tusk "* ]]; then
  install -m 0755 "${operator:-$(built tusk)}" "$bins/tusk"
  operator=$bins/tusk
fi
install -m 0755 "$(built tusk-scale)" "$bins/tusk-scale"
install -m 0755 "$(built tusk-cache-memory)" "$bins/tusk-cache-memory"
eval "$("$repo/e2e/local/binaries.sh")"

# measure OPERATOR CLUSTERS NAMESPACES: one run on a fresh control plane.
measure() {
  local op=$1 clusters=$2 namespaces=$3 version ready=()
  export TUSK_E2E_DIR
  TUSK_E2E_DIR=$(mktemp -d -u /tmp/tusk-scale.XXXXXX)
  trap '"$repo/e2e/local/down.sh" >/dev/null 2>&1 || true' EXIT
  echo "==> $op: $clusters clusters in $namespaces namespace(s): control plane in $TUSK_E2E_DIR ($(uptime))" >&2
  eval "$("$repo/e2e/local/up.sh")"
  if [[ "$op" == tusk ]]; then
    install -m 0755 "$operator" "$TUSK_E2E_DIR/tusk"
    "$repo/e2e/local/operator.sh" install
    # The default info log: what a user runs.
    "$repo/e2e/local/operator.sh" start
    version=$profile
  else
    "$repo/e2e/local/peer.sh" "$op" install
    "$repo/e2e/local/peer.sh" "$op" start
    # The version is in the cache directory's name (scripts/testbin.sh: NAME-VERSION/NAME).
    local bin=TUSK_${op^^}_BIN
    version=$(basename "$(dirname "${!bin}")")
    version=${version#"$op"-}
    ready=(--ready-timeout-seconds "${TUSK_SCALE_READY_TIMEOUT:-600}")
  fi
  # TUSK_SCALE_CACHE_MEMORY=1: where the heap goes, per cached kind, before the deletes.
  local hook=()
  if [[ -n "${TUSK_SCALE_CACHE_MEMORY:-}" && "$op" == tusk ]]; then
    hook=(env TUSK_SCALE_AT_REST="$bins/tusk-cache-memory")
  fi
  local bounds=(--timeout-seconds "${TUSK_SCALE_TIMEOUT:-1800}")
  if [[ -n "${TUSK_SCALE_DELETE_TIMEOUT:-}" ]]; then
    bounds+=(--delete-timeout-seconds "$TUSK_SCALE_DELETE_TIMEOUT")
  fi
  bounds+=(--backlog "${TUSK_SCALE_BACKLOG:-0}")
  if [[ -n "${TUSK_SCALE_ONLY_RW:-}" ]]; then
    bounds+=(--only-rw)
  fi
  TUSK_REPO=$repo "${hook[@]}" "$bins/tusk-scale" --operator "$op" --clusters "$clusters" --namespaces "$namespaces" \
    --rest-seconds "$rest" --build "$version" "${ready[@]}" "${bounds[@]}" \
    | tee >(grep '^|' >>"$out")
  # TUSK_SCALE_AUDIT_DIR=DIR keeps each run's API audit log (which requests, by whom) and
  # the operator's log.
  if [[ -n "${TUSK_SCALE_AUDIT_DIR:-}" ]]; then
    mkdir -p "$TUSK_SCALE_AUDIT_DIR"
    cp "$TUSK_E2E_DIR/logs/audit.log" "$TUSK_SCALE_AUDIT_DIR/$op-$clusters-$namespaces.audit.log"
    cp "$TUSK_E2E_DIR/logs/operator.log" "$TUSK_SCALE_AUDIT_DIR/$op-$clusters-$namespaces.operator.log" 2>/dev/null || true
  fi
  "$repo/e2e/local/down.sh" >/dev/null
  trap - EXIT
}

for run in "${runs[@]}"; do
  clusters=${run%%:*}
  namespaces=1
  [[ "$run" == *:* ]] && namespaces=${run#*:}
  for op in "${operators[@]}"; do measure "$op" "$clusters" "$namespaces"; done
done
# Side by side: one table per N[:NAMESPACES], a column per operator (when more than one ran).
if ((${#operators[@]} > 1)); then
  python3 - "$out" <<'PY'
import re, sys
tables, current = {}, None
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 2 or cells[0].startswith("---"):
        continue
    head = re.match(r"(.*), (\d+ clusters in \d+ namespace\(s\))$", cells[0])
    if head:
        current = tables.setdefault(head[2], {})
        current.setdefault("", []).append(head[1])
        continue
    if current is not None:
        current.setdefault(cells[0], []).append(cells[1])
for size, rows in tables.items():
    print(f"\n| {size} | " + " | ".join(rows.pop("")) + " |")
    print("|---|" + "---|" * len(next(iter(rows.values()), [])))
    for measure, values in rows.items():
        print(f"| {measure} | " + " | ".join(values) + " |")
PY
fi
rm -rf "$bins"
echo "tables in $out" >&2
