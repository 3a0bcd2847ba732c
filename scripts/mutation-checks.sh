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

# name | package | -run regexp | extra environment (space-separated K=V, or -) | expected failure
# The expected failure is an extended regexp that the failed check's message must match: a
# test that fails for another reason (a timeout, a crash, a different check) does not count.
checks=(
  "blob-race-take-turns|./store/objstore/|^TestPutIfAbsentRaceProcesses\$|-|won [0-9]+ of [0-9]+ keys .*the racers took turns"
  "commit-race-take-turns|./test/reliability/|^TestCommitRaceProcesses\$/^file\$|WALKEEPER_RACE_ROUNDS=8|lost put-if-absent races in .*the commits did not race"
  "activity-id-constant|./workflows/|^TestMergeWalActivityIDs|-|middle part is not the run ID"
  "activity-id-first-run|./workflows/|^TestMergeWalActivityIDsAreUniqueAcrossRuns\$|-|used twice across runs"
  "stop-waits-for-waiters|./worker/|^TestWorkerStopDoesNotWaitForMergeWaiters\$|-|Stop(: .*deadline exceeded| took .* behind a merge waiter)"
  "connections-uncapped|./test/hostile/|^TestConnectionLimits\$|-|the worker accepted [0-9]+ idle connections, more than --max-connections"
  "merge-writes-wrong-value|./test/duckdb/|^TestDuckDBReadsMergedBase\$|-|want [0-9]+ rows, got [0-9]+"
  "prepare-allocates-beyond-budget|./test/integration/|^TestConcurrentMergesStayWithinBudget\$|-|process heap grew by"
  "bench-skip-the-merge|./bench/|^TestAppendLatencyQuick\$|-|no generation merged during the busy phases"
  "bench-renamed-key|./bench/|^TestCommitLockQuick\$|-|no value \"mem_ratio_p50\""
  "commit-lock-covers-manifest-read|./bench/|^TestCommitLockQuick\$|-|the lock covers more than the swap"
  "commit-lock-covers-manifest-write|./bench/|^TestCommitLockQuick\$|-|the lock covers more than the swap"
  "commit-lock-hold-grows-with-merge|./store/|^TestCommitLockHoldIsIndependentOfMergeSize\$|-|hold grows with merge size"
  "read-skips-pending|./bench/|^TestReadAmpQuick\$|-|the newest pending generation's value"
  "merge-all-one-pass|./bench/|^TestReadAmpQuick\$|-|merging left [0-9]+ generations pending"
  "merge-wal-timer-per-pass|./bench/|^TestTemporalOverheadQuick\$|-|MergeWal adds .* the bare 4-activity workflow"
  "sweep-scan-slower|./bench/|^TestTemporalOverheadQuick\$|-|a sweep over idle stores took .* the one-generation MergeWal just before it"
  "overdraft-does-not-panic|./store/|^TestMemAccountOverdraftIsBudgetBusy\$|GOFLAGS=-race|race build: an overdraft must panic"
  "history-duration-zero|./cmd/walkeeper/|^TestHistoryAgainstTemporal\$|-|Messages:[[:space:]]+(MergeWal|CompactBase) duration"
  "merge-wal-watchdog-timer|./test/integration/|^TestMergeWalActionsPerPass\$|-|timers in a happy-path merge"
  "compaction-ignores-writes-in-flight|./store/|^TestCompactionKeepsTombstonesOverWritesInFlight\$|-|the tombstone is younger than a write in flight may be"
  "compaction-ignores-unsealed-rows|./store/|^TestCompactionKeepsTombstonesOverUnsealedRows\$|-|a row older than the delete must not come back"
  "compaction-ignores-quarantined-runs|./store/|^TestReleaseRepairedRun\$|-|x stays deleted"
  "late-wal-write-acknowledged|./store/|^TestWALWriteLandingPastTheAckWindowIsNotAcknowledged\$|-|Expected error with \"storage stalled\" in chain"
  "stray-version-is-latest|./store/|^TestFindingStrayManifestVersionAboveTheChainIsForeign\$|-|a handle opened after the stray reads the chain's latest base"
  "stale-wal-copy-replayed|./store/|^TestFindingStaleWALCopyAboveReplayAfterIsNotReplayed\$|-|a deleted key must not come back from a stale WAL copy"
)

if [[ "${1:-}" == "--list" ]]; then
  for c in "${checks[@]}"; do IFS='|' read -r name pkg run _ _ <<<"$c"; echo "$name  $pkg  $run"; done
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
  IFS='|' read -r name pkg run envs want <<<"$c"
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
  echo "== $name: go test -count=1 -v -run '$run' $pkg   (log: $log)" >&2
  envargs=()
  [[ "$envs" != "-" ]] && read -r -a envargs <<<"$envs"
  start=$SECONDS
  env "${envargs[@]}" nice -n 10 go test -count=1 -v -timeout 15m -run "$run" "$pkg" >"$log" 2>&1
  status=$?
  revert
  took=$((SECONDS - start))
  if grep -qE '^(# |FAIL\s.*\[build failed\]|.*\[setup failed\])' "$log"; then
    result="BUILD FAILED (not a result)"
    bad=1
  elif [[ $status -ne 0 ]]; then
    # The expected check's message: test-file lines (t.Errorf/t.Fatalf) or testify's
    # "Error:" / "Messages:" lines. A failure without it failed for another reason.
    why=$(grep -E "$want" "$log" | grep -m1 -vE '^\s*(=== RUN|--- )' | sed -E 's/^\s+//; s/\s+/ /g' | cut -c1-160)
    if [[ -n "$why" ]]; then
      result="FAIL as expected (${took}s): ${why}"
    else
      result="FAILED, but not with /$want/ (${took}s): see $log"
      bad=1
    fi
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
