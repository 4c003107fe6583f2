#!/usr/bin/env bash
# The workspace's one test build (`cargo test --workspace --no-run`) and what is run from it.
#   scripts/workspace-tests.sh run [-j N] [-- ARGS]   # every test executable, N at a time
#   scripts/workspace-tests.sh each PACKAGE [-- ARGS]  # PACKAGE's, one after another
#   scripts/workspace-tests.sh list [PACKAGE]          # TSV: package, directory, label, executable
#   scripts/workspace-tests.sh bin NAME                # path of the binary NAME of that build
# Why one build: cargo resolves dependencies' features per package selection, so after
# `cargo test --workspace`, a `cargo test -p tusk-e2e` or `cargo build -p tusk` compiles kube,
# hyper, tokio and the AWS SDK again with other features, and our crates and every executable
# above them (CI's end-to-end step spent 198 s rebuilding its scenarios that way). The end-to-end
# scripts take their operator, plugin and scenarios from here.
# Why `run`: the executables ran one after another for ~1,060 s, mostly waiting on PostgreSQL,
# MinIO and timers with a core idle; N at a time (TUSK_TEST_JOBS, default 3), longest first by
# the last run's times, each one's output printed whole when it ends.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

# The build's compiler messages, JSON on stdout (progress and diagnostics on stderr).
artifacts() {
  cargo test --workspace --locked --no-run --message-format=json-render-diagnostics
}

# TSV of the test executables: package, package directory, label, executable.
list() {
  artifacts | python3 -c '
import json, os, sys
want = sys.argv[1] if len(sys.argv) > 1 else None
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m["profile"]["test"] or not m.get("executable"):
        continue
    # "path+file:///work/main#tusk@0.1.0", or "path+file:///work/main/backup-agent#0.1.0"
    # when the package is named as its directory.
    url, _, version = m["package_id"].partition("#")
    package = version.split("@")[0] if "@" in version else url.rstrip("/").split("/")[-1]
    if want and package != want:
        continue
    directory = os.path.dirname(m["manifest_path"])
    source = os.path.relpath(m["target"]["src_path"], directory)
    kind = "unittests " if m["target"]["kind"] != ["test"] else ""
    print(package, directory, f"{package} {kind}{source}", m["executable"], sep="\t")
' "$@"
}

bin() {
  artifacts | python3 -c '
import json, sys
found = [m["executable"] for m in map(json.loads, sys.stdin)
         if m.get("reason") == "compiler-artifact" and not m["profile"]["test"]
         and m["target"]["kind"] == ["bin"] and m["target"]["name"] == sys.argv[1]]
if not found:
    sys.exit(f"workspace-tests.sh: no binary {sys.argv[1]} in the workspace test build")
print(found[0])
' "$1"
}

# The test executables (of PACKAGE, or all) as rows; fails when the build or the listing did.
load_rows() {
  local listing
  listing=$(list "$@")
  if [[ -z "$listing" ]]; then echo "workspace-tests.sh: no test executables${1:+ of $1}" >&2; return 1; fi
  mapfile -t rows <<<"$listing"
}

# The environment cargo gives a test: a proc-macro crate's tests link the toolchain's libstd
# dynamically.
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
LD_LIBRARY_PATH="$(rustc --print target-libdir):$target/debug/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
in_package() { # DIRECTORY PACKAGE EXECUTABLE ARGS...
  local directory=$1 package=$2
  shift 2
  (cd "$directory" && exec env CARGO_MANIFEST_DIR="$directory" CARGO_PKG_NAME="$package" "$@")
}

# PACKAGE's test executables one after another with ARGS, their output straight through (as
# `cargo test -p PACKAGE -- ARGS` prints it, a header per executable on stderr); fails when one
# did.
each() {
  local package=$1 rc=0 row directory label executable
  shift
  if [[ "${1:-}" == -- ]]; then shift; fi
  local -a rows
  load_rows "$package"
  for row in "${rows[@]}"; do
    IFS=$'\t' read -r _ directory label executable <<<"$row"
    printf '     Running %s\n' "$label" >&2
    in_package "$directory" "$package" "$executable" "$@" || rc=1
  done
  return "$rc"
}

run() {
  local jobs=${TUSK_TEST_JOBS:-3}
  if [[ "${1:-}" == -j ]]; then jobs=$2; shift 2; fi
  if [[ "${1:-}" == -- ]]; then shift; fi
  local args=("$@") times logs started=$SECONDS
  times="$target/tusk-test-times.tsv"
  logs=$(mktemp -d /tmp/tusk-tests.XXXXXX)
  local -a rows
  load_rows
  # Longest first by the last run (unknown ones first of all): the slowest does not start last.
  mapfile -t rows < <(
    for row in "${rows[@]}"; do
      IFS=$'\t' read -r _ _ label _ <<<"$row"
      last=$(awk -F'\t' -v l="$label" '$1 == l { print $2 }' "$times" 2>/dev/null || true)
      printf '%s\t%s\n' "${last:-100000}" "$row"
    done | sort -t$'\t' -k1,1nr | cut -f2-
  )
  echo "workspace-tests.sh: ${#rows[@]} test executables, $jobs at a time (logs: $logs)"
  declare -A label_of log_of began_at
  local failed=() running=0 i=0 pid rc
  trap 'jobs -p | xargs -r kill 2>/dev/null || true' EXIT
  reap() {
    rc=0
    wait -n -p pid || rc=$?
    running=$((running - 1))
    local took=$((SECONDS - ${began_at[$pid]})) verdict=PASS
    if ((rc != 0)); then verdict=FAIL; failed+=("${label_of[$pid]}"); fi
    printf '%s\t%s\n' "${label_of[$pid]}" "$took" >>"$logs/times"
    printf '%s %4ss  %s  %s\n' "$verdict" "$took" "${label_of[$pid]}" \
      "$(grep -E '^test result:' "${log_of[$pid]}" | tail -1)"
    if ((rc != 0)); then sed 's/^/    /' "${log_of[$pid]}"; fi
  }
  for row in "${rows[@]}"; do
    IFS=$'\t' read -r package directory label executable <<<"$row"
    while ((running >= jobs)); do reap; done
    i=$((i + 1))
    in_package "$directory" "$package" "$executable" "${args[@]}" >"$logs/$i.log" 2>&1 &
    label_of[$!]=$label log_of[$!]="$logs/$i.log" began_at[$!]=$SECONDS
    running=$((running + 1))
  done
  while ((running > 0)); do reap; done
  trap - EXIT
  # This run's times order the next one.
  if [[ -z "${args[*]}" ]]; then cp "$logs/times" "$times"; fi
  echo
  if ((${#failed[@]})); then
    printf 'workspace-tests.sh: %d of %d failed in %ss:\n' "${#failed[@]}" "${#rows[@]}" "$((SECONDS - started))"
    printf '  %s\n' "${failed[@]}"
    return 1
  fi
  echo "workspace-tests.sh: ${#rows[@]} test executables passed in $((SECONDS - started))s"
  rm -rf "$logs"
}

case "${1:-}" in
  run | each | list | bin) command=$1; shift; "$command" "$@" ;;
  *) sed -n '2,5p' "$0" | sed 's/^# //' >&2; exit 2 ;;
esac
