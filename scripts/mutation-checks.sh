#!/usr/bin/env bash
# mutation-checks.sh — prove that the suite's checks bite: for each mutation below, apply a
# small patch from scripts/mutations/ that breaks the property a test guards, run that test,
# expect it to FAIL, and revert the patch (also on Ctrl-C or error, via trap). Prints a table
# mutation × test × result and exits 1 if a mutation survived (its test passed) or a patch no
# longer applies.
#
# Not part of scripts/test.sh: each check runs a real test (some start a Temporal dev server,
# run child processes or a bench scenario), minutes in all. Needs a clean checkout of the
# patched files, and edits the work tree while it runs: run nothing else from it meanwhile.
#
#   scripts/mutation-checks.sh            # every mutation
#   scripts/mutation-checks.sh NAME...    # only these (names as in the table)
#   scripts/mutation-checks.sh --list
#
# Tests that start Temporal find the CLI via $WALKEEPER_TEMPORAL_CLI (see scripts/test.sh).
# docs/RELIABILITY.md ("Mutation checks") records what each mutation breaks and the results.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# name | package | -run regexp | extra environment (space-separated K=V, or -)
checks=(
  "blob-race-take-turns|./store/|^TestPutIfAbsentRaceProcesses\$|-"
  "commit-race-take-turns|./test/reliability/|^TestCommitRaceProcesses\$/^file\$|WALKEEPER_RACE_ROUNDS=8"
  "activity-id-constant|./workflows/|^TestMergeWalActivityIDs|-"
  "activity-id-first-run|./workflows/|^TestMergeWalActivityIDsAreUniqueAcrossRuns\$|-"
  "stop-waits-for-waiters|./worker/|^TestWorkerStopDoesNotWaitForMergeWaiters\$|-"
  "merge-writes-wrong-value|./test/duckdb/|^TestDuckDBReadsMergedBase\$|-"
  "prepare-allocates-beyond-budget|./test/integration/|^TestConcurrentMergesStayWithinBudget\$|-"
  "bench-skip-the-merge|./bench/|^TestAppendLatencyQuick\$|-"
  "bench-renamed-key|./bench/|^TestCommitLockQuick\$|-"
  "commit-lock-covers-manifest-read|./bench/|^TestCommitLockQuick\$|-"
)

if [[ "${1:-}" == "--list" ]]; then
  for c in "${checks[@]}"; do IFS='|' read -r name pkg run _ <<<"$c"; echo "$name  $pkg  $run"; done
  exit 0
fi

applied=""
revert() {
  if [[ -n "$applied" ]]; then
    git apply -R "scripts/mutations/$applied.patch" || echo "mutation-checks: could not revert $applied: run git checkout on the files in scripts/mutations/$applied.patch" >&2
    applied=""
  fi
}
trap revert EXIT
trap 'revert; exit 130' INT TERM

mkdir -p .cache
rows=()
bad=0
for c in "${checks[@]}"; do
  IFS='|' read -r name pkg run envs <<<"$c"
  if [[ $# -gt 0 ]] && ! printf '%s\n' "$@" | grep -qx "$name"; then
    continue
  fi
  patch="scripts/mutations/$name.patch"
  if [[ ! -f "$patch" ]] || ! git apply --check "$patch" 2>/dev/null; then
    echo "mutation-checks: $name: patch does not apply ($patch); re-anchor it on the current code" >&2
    rows+=("$name|$pkg $run|patch does not apply")
    bad=1
    continue
  fi
  git apply "$patch" && applied="$name"
  log=".cache/mutation-$name.log"
  echo "== $name: go test -count=1 -run '$run' $pkg   (log: $log)" >&2
  envargs=()
  [[ "$envs" != "-" ]] && read -r -a envargs <<<"$envs"
  start=$SECONDS
  env "${envargs[@]}" nice -n 10 go test -count=1 -timeout 15m -run "$run" "$pkg" >"$log" 2>&1
  status=$?
  revert
  took=$((SECONDS - start))
  if grep -qE '^(# |FAIL\s.*\[build failed\]|.*\[setup failed\])' "$log"; then
    result="BUILD FAILED (not a result)"
    bad=1
  elif [[ $status -ne 0 ]]; then
    # The last test-file line with text is usually the failed check (logs come before it);
    # testify prints its message on an "Error:" line below an empty one.
    why=$(grep -E '^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: \S' "$log" | tail -1 | sed -E 's/^\s+//' | cut -c1-110)
    [[ -n "$why" ]] || why=$(grep -m1 -E '^\s+Error:' "$log" | sed -E 's/^\s+//; s/\s+/ /g' | cut -c1-110)
    result="FAIL as expected (${took}s): ${why:-see $log}"
  else
    result="PASSED: mutation survived (${took}s)"
    bad=1
  fi
  rows+=("$name|$pkg $run|$result")
done

echo
printf '| %s | %s | %s |\n' "mutation" "test" "result"
printf '|---|---|---|\n'
for r in "${rows[@]}"; do
  IFS='|' read -r a b c <<<"$r"
  printf '| %s | `%s` | %s |\n' "$a" "$b" "$c"
done
exit $bad
