#!/usr/bin/env bash
# The scale benchmark: for each N[:NAMESPACES] (default: 100 1000 1000:50), a fresh local control
# plane with kwok playing the nodes (e2e/local/up.sh), the release operator as a process with
# its ServiceAccount's RBAC (e2e/local/operator.sh), then `tusk-scale` applies N clusters at once
# and prints what it measured (e2e/src/scale/). Tables go to stdout and to $TUSK_SCALE_OUT.
# TUSK_SCALE_PROFILE=debug measures the debug build instead (CI's short run: it proves the
# benchmark works without a release build; its figures are not the product's).
# TUSK_SCALE_OPERATOR_BIN=PATH measures that operator binary instead (before/after comparisons).
#   scripts/bench-scale.sh [--rest SECONDS] [N[:NAMESPACES]...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rest=600
if [[ "${1:-}" == --rest ]]; then rest=$2; shift 2; fi
runs=("$@")
((${#runs[@]})) || runs=(100 1000 1000:50)
out=${TUSK_SCALE_OUT:-$(mktemp /tmp/tusk-scale.XXXXXX.md)}

profile=${TUSK_SCALE_PROFILE:-release}
case "$profile" in
  release) build=(--release) ;;
  debug) build=() ;;
  *) echo "bench-scale.sh: TUSK_SCALE_PROFILE is release or debug, not $profile" >&2; exit 2 ;;
esac
operator=${TUSK_SCALE_OPERATOR_BIN:-}
echo "==> building: ${operator:+not }the operator ($profile) and tusk-scale" >&2
if [[ -z "$operator" ]]; then (cd "$repo" && cargo build --locked --quiet "${build[@]}" --bin tusk); fi
(cd "$repo" && cargo build --locked --quiet -p tusk-e2e --bin tusk-scale)
target=$(cd "$repo" && cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
operator=${operator:-$target/$profile/tusk}
eval "$("$repo/e2e/local/binaries.sh")"

for run in "${runs[@]}"; do
  clusters=${run%%:*}
  namespaces=1
  [[ "$run" == *:* ]] && namespaces=${run#*:}
  export TUSK_E2E_DIR
  TUSK_E2E_DIR=$(mktemp -d -u /tmp/tusk-scale.XXXXXX)
  trap '"$repo/e2e/local/down.sh" >/dev/null 2>&1 || true' EXIT
  echo "==> $clusters clusters in $namespaces namespace(s): control plane in $TUSK_E2E_DIR" >&2
  eval "$("$repo/e2e/local/up.sh")"
  install -m 0755 "$operator" "$TUSK_E2E_DIR/tusk"
  "$repo/e2e/local/operator.sh" install
  # The default info log: what a user runs.
  "$repo/e2e/local/operator.sh" start
  "$target/debug/tusk-scale" --clusters "$clusters" --namespaces "$namespaces" \
    --rest-seconds "$rest" --build "$profile" | tee >(grep '^|' >>"$out")
  "$repo/e2e/local/down.sh" >/dev/null
  trap - EXIT
done
echo "tables in $out" >&2
