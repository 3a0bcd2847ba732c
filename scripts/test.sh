#!/usr/bin/env bash
# The project's test command: formatting, go vet, then every test with the race detector.
# Tests that need Temporal start their own dev server (internal/testtemporal); they find the
# Temporal CLI via $WALKEEPER_TEMPORAL_CLI, PATH, GOPATH/bin or .cache/bin, and build it into
# .cache/bin if it is missing. The full verbose log is kept in .cache/test.log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .cache
log=.cache/test.log

echo "== gofmt"
unformatted=$(find . -name '*.go' -not -path './.cache/*' -not -path './.git/*' -print0 | xargs -0 gofmt -l)
if [[ -n "$unformatted" ]]; then
  echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

echo "== go mod tidy -diff"
if ! go mod tidy -diff; then
  echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1
fi

echo "== go vet ./..."
go vet ./...

echo "== docker-compose config, Prometheus rules, Grafana dashboard"
./scripts/check-compose.sh

echo "== go test -race -count=1 -timeout 25m ./...   (verbose log: $log)"
set +e
go test -race -count=1 -timeout 25m -v ./... 2>&1 | tee "$log" | grep -E --line-buffered '^(ok|FAIL|--- FAIL|panic:|\?|# )|^[^ ].*\.go:[0-9]+:[0-9]+: '
status=${PIPESTATUS[0]}
set -e

passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
if [[ $status -ne 0 ]]; then
  echo
  echo "== failures (details in $log)"
  grep -nE -A25 '^\s*--- FAIL|^panic:|^FAIL\s|build failed|\[setup failed\]' "$log" | head -400 || true
fi
echo
echo "summary: ${passed} passed, ${failed} failed, ${skipped} skipped"
if [[ $status -ne 0 ]]; then
  echo "RESULT: FAIL (go test exit status $status)"
else
  echo "RESULT: OK"
fi
exit $status
