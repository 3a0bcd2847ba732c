#!/usr/bin/env bash
# The project's test command, the whole run on a fresh machine:
#
#   1. install every server the suites start into .cache/ (scripts/install-servers.sh:
#      the Temporal CLI and server, PostgreSQL, MinIO, versitygw, fake-gcs-server, Azurite;
#      each a no-op when already installed; WALKEEPER_SKIP_INSTALL=1 skips the step);
#   2. beside 1: gofmt, go mod tidy, go vet, the compose/Prometheus/Grafana checks;
#   3. every other test with the race detector, Temporal on the CLI's dev server — among them
#      the operator suite (test/operator: every Temporal Web / CLI action on a merge, on real
#      worker processes);
#   4. beside 3, in parallel: the integration suite, the reliability suite's Temporal
#      restarts and the rolling upgrade (test/upgrade, but its replay of the recorded
#      histories on build B, which needs no server) on the production Temporal server on
#      PostgreSQL (4 history shards, SQL visibility; WALKEEPER_TEST_TEMPORAL_SERVER=cluster).
#      WALKEEPER_SKIP_CLUSTER=1 skips it;
#   5. beside 3 too: the bench package (every walkeeper-bench scenario in --quick mode), in
#      two lanes, each with about half the scenarios: under -race it was the run's longest
#      test binary (571–634 s wall, 246–298 s CPU on 2 vCPUs), mostly waiting on its
#      scenarios' fixed durations. Without -race, but for read-amp, merge-throughput and
#      parallel-prepare: the scenarios drive the product code that 3 runs under -race, and
#      their timing checks are ratios measured side by side; those three time short reads,
#      merges and prepares, whose ratios the race detector's heavier per-operation cost keeps
#      clear of a loaded machine's noise.
#   6. beside 3 too, without -race: the fleet and the storage backend matrix (test/fleet,
#      test/backends). Their product code runs under -race in 3 (store, store/objstore,
#      activities, workflows, test/integration); what they add is scale and real servers, and
#      there the race detector only multiplied time: registering the fleet's 50,000 stores took
#      162 s under -race beside the other packages and 3 s without, and the matrix's
#      cross-process races re-execute the test binary, race-built, as their children. With
#      them the packages where -race has nothing to watch (no goroutine in their code or
#      tests, or harnesses and static checks whose code runs under -race inside 3's packages).
#   7. the backend × suite matrix and the Temporal server × suite table.
#
# Logs: .cache/test.log (3, verbose), .cache/test-cluster.log (4), .cache/test-bench.log and
# .cache/test-bench2.log (5), .cache/test-plain.log (6).
# Exit status non-zero if anything failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .cache
log=.cache/test.log
clog=.cache/test-cluster.log
blog=.cache/test-bench.log
blog2=.cache/test-bench2.log
plog=.cache/test-plain.log
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
# Every test binary runs through scripts/test-exec.sh, which records its wall and CPU seconds
# (printed at the end: where the run's time went). Test binaries link without DWARF: stack
# traces and the race detector's reports do not read it, and a link costs about 30 % less CPU
# (7.3 → 5.1 CPU-s for test/integration under -race), on every one of some 50 binaries a run.
export WALKEEPER_MODULE_ROOT="$PWD"
export WALKEEPER_TEST_T0="$t0"
test_flags=(-exec "$PWD/scripts/test-exec.sh" -ldflags=-w)
# The builds (servers, vet, tests) collect garbage four times less often: the compiler spends
# 15-25 % less CPU (decision 0371). Test binaries run with the caller's GOGC: test-exec.sh
# puts it back, so nothing a test measures or bounds changes.
export WALKEEPER_CALLER_GOGC="${GOGC-unset}"
export GOGC=400
times_dir=.cache/test-times
rm -rf "$times_dir" && mkdir -p "$times_dir"

# 1 beside 2: the installs are mostly other programs' builds and downloads, the checks this
# module's compile; the tests need both.
install_pid=
if [[ -z "${WALKEEPER_SKIP_INSTALL:-}" ]]; then
  stamp "== beside the checks: install servers (scripts/install-servers.sh; logs in .cache/install-logs)"
  ./scripts/install-servers.sh >/dev/null 2>.cache/install-servers.log &
  install_pid=$!
fi
export WALKEEPER_TEMPORAL_CLI="${WALKEEPER_TEMPORAL_CLI:-$PWD/.cache/bin/temporal}"

stamp "== gofmt"
unformatted=$(find . -name '*.go' -not -path './.cache/*' -not -path './.git/*' -print0 | xargs -0 gofmt -l)
if [[ -n "$unformatted" ]]; then
  echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

stamp "== go mod tidy -diff"
if ! go mod tidy -diff; then
  echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1
fi

stamp "== go vet ./..."
go vet ./...

# One walkeeper binary for the run, built beside the compose checks: every suite that starts
# worker processes links to it (internal/testkit/walkeeperproc.EnvBinary), where each test
# package built its own.
stamp "== beside the compose checks: go build ./cmd/walkeeper, the binary of every suite's worker processes"
bin_dir=$(mktemp -d)
go build -ldflags=-w -o "$bin_dir/walkeeper" ./cmd/walkeeper &
build_pid=$!
# A failed check ends the script with the build still running: stop it before its directory
# goes, or it writes its binary into a directory nobody removes.
trap '[[ -z "$build_pid" ]] || { kill "$build_pid" 2>/dev/null; wait "$build_pid" 2>/dev/null; } || true; rm -rf "$bin_dir"' EXIT
export WALKEEPER_TEST_BINARY="$bin_dir/walkeeper"

stamp "== docker-compose config, Prometheus rules, Grafana dashboard"
./scripts/check-compose.sh
# Reaped, its PID may go to another process: the trap must not kill that one.
wait "$build_pid"
build_pid=

if [[ -n "$install_pid" ]]; then
  install_status=0
  wait "$install_pid" || install_status=$?
  cat .cache/install-servers.log
  stamp "== servers installed (exit $install_status)"
  [[ $install_status == 0 ]] || exit 1
fi

# 4, in the background: mostly waiting on servers and timeouts, so it shares the cores with 3
# at little cost. No -race here: the same code runs under -race in 3.
cluster_pid=
if [[ -z "${WALKEEPER_SKIP_CLUSTER:-}" ]]; then
  stamp "== beside it: Temporal on PostgreSQL: ./test/integration, ./test/reliability restarts, ./test/upgrade (log: $clog)"
  (
    export WALKEEPER_TEST_TEMPORAL_SERVER=cluster WALKEEPER_TEST_TIMES="$PWD/$times_dir/cluster"
    rc=0
    go test "${test_flags[@]}" -count=1 -timeout 25m -v ./test/integration || rc=1
    go test "${test_flags[@]}" -count=1 -timeout 25m -v -run '^TestWorkerProcessesSurviveKillsAndTemporalRestarts$' ./test/reliability || rc=1
    go test "${test_flags[@]}" -count=1 -timeout 25m -v -run '^TestRollingUpgradeKeepsMergesRunning$' ./test/upgrade || rc=1
    exit $rc
  ) >"$clog" 2>&1 &
  cluster_pid=$!
fi

# 5, in the background: the longest scenarios split about evenly between two processes.
# Three short timings of reads, merges and prepares stay under -race, whose heavier CPU work
# per operation keeps their ratios clear of the scheduler noise of a loaded machine: without
# it, each failed its bound beside the other lanes or the fresh run's compiles.
bench_half='^(TestIncidentQuick|TestFleetWorkerQuick|TestFairnessQuick|TestFleetQuick|TestHostileQuick)$'
bench_race='^(TestReadAmpQuick|TestMergeThroughputQuick|TestParallelPrepareQuick)$'
stamp "== beside it: go test ./bench, in two processes (logs: $blog, $blog2)"
WALKEEPER_TEST_TIMES="$PWD/$times_dir/bench" go test "${test_flags[@]}" -count=1 -timeout 25m -v -run "$bench_half" ./bench >"$blog" 2>&1 &
bench_pid=$!
(
  rc=0
  WALKEEPER_TEST_TIMES="$PWD/$times_dir/bench-race" go test "${test_flags[@]}" -race -count=1 -timeout 25m -v -run "$bench_race" ./bench || rc=1
  WALKEEPER_TEST_TIMES="$PWD/$times_dir/bench2" go test "${test_flags[@]}" -count=1 -timeout 25m -v -skip "$bench_half|$bench_race" ./bench || rc=1
  exit $rc
) >"$blog2" 2>&1 &
bench2_pid=$!

# 6, in the background, with the packages where the race detector has nothing to watch:
# neither their code nor their tests start a goroutine (formats, validation, admin calls), or
# they are test harnesses and static checks whose code runs under -race inside 3's packages.
# In 3 each cost a race-built link (1 to 10 CPU-s) and ran at the end of its lane. Then
# store's tests that run under an address-space limit, which the race detector's reserved
# address space makes them skip in 3.
plain=(./test/fleet ./test/backends)
unraced=(./contract ./internal/jsonscan ./store/manifest ./store/rowcodec ./target
  ./internal/actioncount ./cmd/walkeeper-bench ./temporaladmin ./test/lint ./test/deploy/...
  ./test/duckdb ./internal/testkit/s3test ./internal/testkit/walkeeperproc ./internal/testkit/testtemporal
  ./internal/testkit/promtext)
stamp "== beside it: go test ${plain[*]} ${unraced[*]}, then ./store -run 'UnderAMemoryLimit\$' (log: $plog)"
(
  export WALKEEPER_TEST_TIMES="$PWD/$times_dir/plain"
  rc=0
  go test "${test_flags[@]}" -count=1 -timeout 25m -v "${plain[@]}" "${unraced[@]}" || rc=1
  go test "${test_flags[@]}" -count=1 -timeout 10m -v -run 'UnderAMemoryLimit$' ./store || rc=1
  exit $rc
) >"$plog" 2>&1 &
plain_pid=$!

# go test starts packages in the order given: the longest (wall or CPU seconds, warm run) go first,
# so that none of them starts last and runs on while the cores idle. Three at a time: the other
# lanes end about half-way, and the race run's packages mostly wait on Temporal. worker goes
# second: two of its 200 s wait out the SDK's two minutes of retries, which cost no CPU beside
# the busy lanes and, started sixth, kept the run going for 3 minutes after they ended.
module=$(go list -m)
longest=(store worker store/objstore test/integration test/reliability test/upgrade workflows
  internal/testkit/temporalcluster test/operator test/hostile)
longest=("${longest[@]/#/$module/}")
race_pkgs=("${longest[@]}" $(go list ./... | grep -v -E '/bench$' |
  grep -v -x -F -f <(printf '%s\n' "${longest[@]}"; go list "${plain[@]}" "${unraced[@]}")))
stamp "== go test -race -count=1 -timeout 25m ./... but ./bench and 6's packages, longest first   (verbose log: $log)"
set +e
WALKEEPER_TEST_TIMES="$PWD/$times_dir/main" go test "${test_flags[@]}" -race -p 3 -count=1 -timeout 25m -v "${race_pkgs[@]}" 2>&1 | tee "$log" | grep -E --line-buffered '^(ok|FAIL|--- FAIL|panic:|\?|# )|^[^ ].*\.go:[0-9]+:[0-9]+: '
status=${PIPESTATUS[0]}
set -e
stamp "== go test ./... done (exit $status)"

plain_status=0
wait "$plain_pid" || plain_status=$?
stamp "== fleet and backend matrix run done (exit $plain_status)"
grep -E '^(ok|FAIL|--- FAIL|panic:)' "$plog" || true

bench_status=0
wait "$bench_pid" || bench_status=$?
wait "$bench2_pid" || bench_status=$?
stamp "== bench run done (exit $bench_status)"
grep -E '^(ok|FAIL|--- FAIL|panic:)' "$blog" "$blog2" || true

cluster_status=0
if [[ -n "$cluster_pid" ]]; then
  wait "$cluster_pid" || cluster_status=$?
  stamp "== cluster run done (exit $cluster_status)"
  grep -E '^(ok|FAIL|--- FAIL|panic:)' "$clog" || true
fi

logs=("$log" "$plog" "$blog" "$blog2" ${cluster_pid:+"$clog"})
passed=$(cat "${logs[@]}" | grep -cE '^\s*--- PASS' || true)
failed=$(cat "${logs[@]}" | grep -cE '^\s*--- FAIL' || true)
skipped=$(cat "${logs[@]}" | grep -cE '^\s*--- SKIP' || true)
for f in "${logs[@]}"; do
  if grep -qE '^\s*--- FAIL|^panic:|^FAIL\s' "$f"; then
    echo
    echo "== failures in $f"
    ./scripts/failed-output.sh "$f" | head -200 || true
    grep -nE -A25 '^\s*--- FAIL|^panic:|^FAIL\s|build failed|\[setup failed\]' "$f" | head -300 || true
  fi
done

echo
echo "== storage backend matrix (test/backends, $plog)"
matrix_status=0
./scripts/matrix-table.sh "$plog" || matrix_status=$?
echo
echo "== Temporal servers"
./scripts/matrix-table.sh --temporal "$log" ${cluster_pid:+"$clog"} || matrix_status=$?

echo
echo "== where the time went: test binaries by CPU seconds (wall s, CPU s, started at s, lane; $times_dir)"
for f in "$times_dir"/*; do
  [[ -f "$f" ]] && sed "s|\$| $(basename "$f")|" "$f"
done | sort -k3,3 -g -r | awk '{ cpu += $3; printf "  %-40s %7.1f %7.1f %7d  %s\n", $1, $2, $3, $4, $5 } END { printf "  %-40s %7s %7.1f\n", "all test binaries", "", cpu }'

echo
echo "summary: ${passed} passed, ${failed} failed, ${skipped} skipped; $(( $(date +%s) - t0 ))s"
if [[ $status -ne 0 || $plain_status -ne 0 || $bench_status -ne 0 || $cluster_status -ne 0 || $matrix_status -ne 0 ]]; then
  echo "RESULT: FAIL (go test $status, fleet and matrix $plain_status, bench $bench_status, cluster $cluster_status, matrix table $matrix_status)"
  exit 1
fi
echo "RESULT: OK"
