#!/usr/bin/env bash
# failed-output.sh LOG: what each failed test printed, from a `go test -v` log. Parallel tests
# interleave their output under "=== NAME" headers, so the message a test failed with is
# usually far above its "--- FAIL" line; this prints each failed test's own lines, the last
# 40 of each.
set -euo pipefail
log=$1
failed=$(grep -oE -e '--- FAIL: [^ ]+' "$log" | awk '{print $3}' | sort -u)
[[ -n "$failed" ]] || exit 0
awk -v names="$failed" '
BEGIN { n = split(names, list, "\n"); for (i = 1; i <= n; i++) want[list[i]] = 1; keep = 40 }
/^=== (RUN|CONT|NAME|PAUSE)/ { cur = $3; next }
/^[[:space:]]*--- (PASS|FAIL|SKIP)/ { next }
/^(ok|FAIL|PASS)([[:space:]]|$)/ { cur = ""; next }
cur != "" && (cur in want) {
  c = count[cur]++
  lines[cur, c % keep] = FNR ": " $0
}
END {
  for (i = 1; i <= n; i++) {
    name = list[i]; c = count[name]
    print "--- output of " name (c > keep ? " (last " keep " of " c " lines)" : "")
    for (j = (c > keep ? c - keep : 0); j < c; j++) print "  " lines[name, j % keep]
  }
}' "$log"
