#!/usr/bin/env bash
# go test -exec wrapper (scripts/test.sh): runs one package's test binary and appends a line
# "PACKAGE_DIR WALL_SECONDS CPU_SECONDS START_SECOND" to $WALKEEPER_TEST_TIMES, so every run can
# say where its time went and when each binary ran (START_SECOND counts from
# $WALKEEPER_TEST_T0, the run's start in Unix seconds, or is 0 without it). CPU is user + system time of the binary and every child it waited for (worker
# processes, servers a test starts and stops), from bash's `times`; the exit status is the
# binary's. The binary runs with the GOGC test.sh was called with (test.sh raises it for the
# builds only); the go commands a test runs (internal/testkit/walkeeperproc.Go: the walkeeper
# binary, test/upgrade's build B) build with the run's GOGC, through WALKEEPER_BUILD_GOGC.
if [[ -n "${WALKEEPER_CALLER_GOGC:-}" ]]; then
  export WALKEEPER_BUILD_GOGC="${GOGC-}"
  if [[ "$WALKEEPER_CALLER_GOGC" == unset ]]; then unset GOGC; else export GOGC="$WALKEEPER_CALLER_GOGC"; fi
  unset WALKEEPER_CALLER_GOGC
fi
start=$(date +%s%N)
"$@"
rc=$?
if [[ -n "${WALKEEPER_TEST_TIMES:-}" ]]; then
  # `times` must run in this shell (a pipe or $(...) would run it in a subshell, whose
  # children are not the binary).
  times >"$WALKEEPER_TEST_TIMES.$$"
  cpu=$(awk 'NR == 2 {
    s = 0
    for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] }
    printf "%.1f", s }' "$WALKEEPER_TEST_TIMES.$$")
  rm -f "$WALKEEPER_TEST_TIMES.$$"
  wall=$(( ($(date +%s%N) - start) / 1000000 ))
  since=$(( start / 1000000000 - ${WALKEEPER_TEST_T0:-$(( start / 1000000000 ))} ))
  printf '%s %d.%03d %s %d\n' "${PWD#"$WALKEEPER_MODULE_ROOT"/}" $((wall / 1000)) $((wall % 1000)) "$cpu" "$since" >>"$WALKEEPER_TEST_TIMES"
fi
exit $rc
