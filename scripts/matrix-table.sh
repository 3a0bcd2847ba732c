#!/usr/bin/env bash
# Print the storage backend matrix (backend x suite x result) from a verbose `go test -v`
# log of ./test/backends, e.g. the .cache/test.log that scripts/test.sh keeps:
#
#   scripts/matrix-table.sh [LOG]        (default .cache/test.log)
#
# A row per backend, a column per suite, PASS/FAIL/SKIP per cell ("-" = not run). Exit
# status 1 if any cell failed or was skipped under CI (a skipped server there is a failure).
set -euo pipefail
log="${1:-.cache/test.log}"
[[ -f "$log" ]] || { echo "matrix-table: $log: no such file" >&2; exit 2; }
awk -v ci="${CI:-}" '
  match($0, /--- (PASS|FAIL|SKIP): TestBackend[A-Za-z]*\/[^\/ ]+\/[^ ]+/) {
    s = substr($0, RSTART, RLENGTH)
    split(s, a, " "); res = a[2]; sub(":", "", res)
    n = split(a[3], p, "/"); be = p[2]; su = p[3]; for (i = 4; i <= n; i++) su = su "/" p[i]
    if (!(be in bseen)) { bseen[be] = 1; border[++nb] = be }
    if (!(su in sseen)) { sseen[su] = 1; sorder[++ns] = su }
    cell[be, su] = res
    if (res == "FAIL" || (res == "SKIP" && ci != "")) bad = 1
  }
  END {
    if (nb == 0) { print "matrix-table: no TestBackend* results in the log"; exit 1 }
    printf "%-18s", "backend"; for (j = 1; j <= ns; j++) printf " %-22s", sorder[j]; print ""
    for (i = 1; i <= nb; i++) {
      printf "%-18s", border[i]
      for (j = 1; j <= ns; j++) { c = cell[border[i], sorder[j]]; printf " %-22s", (c == "" ? "-" : c) }
      print ""
    }
    exit bad
  }' "$log"
