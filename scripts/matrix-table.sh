#!/usr/bin/env bash
# Print the result tables of a test run from verbose `go test -v` logs (the ones
# scripts/test.sh keeps):
#
#   scripts/matrix-table.sh [LOG]                  storage backends: backend x suite
#                                                  (test/backends TestMatrix; default .cache/test-plain.log)
#   scripts/matrix-table.sh --temporal DEVLOG [CLUSTERLOG]
#                                                  Temporal server x suite: test/integration, the
#                                                  reliability suite's Temporal restarts and the
#                                                  rolling upgrade (test/upgrade)
#
# PASS/FAIL/SKIP per cell ("-" = not run). Exit status 1 if any cell failed, or under CI
# (env CI set) was skipped or not run: there every server must run.
set -euo pipefail

if [[ "${1:-}" == "--temporal" ]]; then
  shift
  [[ $# -ge 1 ]] || { echo "matrix-table: --temporal DEVLOG [CLUSTERLOG]" >&2; exit 2; }
  names=(dev-server postgres-cluster)
  # test_result TEST LOG: the last PASS, FAIL or SKIP line of test TEST in LOG, or "-".
  test_result() {
    awk -v test="$1" 'match($0, "--- (PASS|FAIL|SKIP): " test " ") { split(substr($0, RSTART, RLENGTH), a, " "); r = a[2]; sub(":", "", r) }
      END { print (r == "" ? "-" : r) }' "$2"
  }
  bad=0
  printf '%-18s %-20s %-28s %-20s\n' "temporal server" "test/integration" "reliability restarts" "rolling upgrade"
  n=0
  for f in "$@"; do
    [[ -f "$f" ]] || { echo "matrix-table: $f: no such file" >&2; exit 2; }
    name=${names[$n]:-log$n}; n=$((n + 1))
    integ=$(awk '$1 == "ok" && $2 ~ /\/test\/integration$/ { r = "PASS" } $1 == "FAIL" && $2 ~ /\/test\/integration$/ { r = "FAIL" } END { print (r == "" ? "-" : r) }' "$f")
    rel=$(test_result TestWorkerProcessesSurviveKillsAndTemporalRestarts "$f")
    upg=$(test_result TestRollingUpgradeKeepsMergesRunning "$f")
    printf '%-18s %-20s %-28s %-20s\n' "$name" "$integ" "$rel" "$upg"
    for c in "$integ" "$rel" "$upg"; do
      if [[ $c == FAIL ]] || [[ -n "${CI:-}" && $c != PASS ]]; then bad=1; fi
    done
  done
  exit $bad
fi

log="${1:-.cache/test-plain.log}"
[[ -f "$log" ]] || { echo "matrix-table: $log: no such file" >&2; exit 2; }
awk -v ci="${CI:-}" '
  # Only the suite level: TestMatrix/<backend>/<suite>, not the suites own subtests.
  match($0, /--- (PASS|FAIL|SKIP): TestMatrix\/[^\/ ]+\/[^\/ ]+ /) {
    s = substr($0, RSTART, RLENGTH)
    split(s, a, " "); res = a[2]; sub(":", "", res)
    split(a[3], p, "/"); be = p[2]; su = p[3]
    if (!(be in bseen)) { bseen[be] = 1; border[++nb] = be }
    if (!(su in sseen)) { sseen[su] = 1; sorder[++ns] = su }
    cell[be, su] = res
  }
  END {
    if (nb == 0) { print "matrix-table: no TestMatrix results in the log"; exit 1 }
    for (j = 1; j <= ns; j++) w[j] = length(sorder[j]) > 4 ? length(sorder[j]) : 4
    printf "%-16s", "backend"; for (j = 1; j <= ns; j++) printf(" %-" w[j] "s", sorder[j]); print ""
    for (i = 1; i <= nb; i++) {
      printf "%-16s", border[i]
      for (j = 1; j <= ns; j++) {
        c = cell[border[i], sorder[j]]; if (c == "") c = "-"
        if (c == "FAIL" || (ci != "" && c != "PASS")) bad = 1
        printf(" %-" w[j] "s", c)
      }
      print ""
    }
    exit bad
  }' "$log"
