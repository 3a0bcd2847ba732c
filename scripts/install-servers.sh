#!/usr/bin/env bash
# Install every server the test suites start, into ./.cache (each installer is idempotent and
# a no-op when its version is already there):
#
#   Temporal server, temporal-sql-tool   scripts/install-temporal-server.sh (one build with
#   and the Temporal CLI (dev server)    the CLI; scripts/install-temporal.sh is the CLI alone)
#   PostgreSQL 15 (Debian package)       scripts/install-postgres.sh
#   MinIO, versitygw (s3://)             scripts/install-minio.sh, scripts/install-versitygw.sh
#   fake-gcs-server (gs://)              scripts/install-fake-gcs-server.sh
#   Azurite (azblob://, npm)             scripts/install-azurite.sh
#
# The Go builds are CPU-bound and share the build cache, so they run two at a time
# (INSTALL_JOBS); apt-get and npm are network-bound and run beside them. Each installer's
# output goes to .cache/install-logs/NAME.log; a summary with the wall and CPU seconds each
# took (the CPU of the installer and every process it waited for: the compiles) is printed at
# the end. Exit status 1 if any installer failed.
#
# One run at a time (a lock file): a second run, e.g. .ci/run's compose stage beside the test
# command, waits for the first and then finds everything installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOGS="$ROOT/.cache/install-logs"
mkdir -p "$LOGS"
exec 9>"$ROOT/.cache/install-servers.lock"
flock 9
JOBS="${INSTALL_JOBS:-2}"

run() { # run NAME SCRIPT: runs one installer, records its status, wall and CPU seconds
  local name=$1 script=$2 start rc=0 cpu
  start=$(date +%s)
  # Each run is its own background subshell, so its children's times are this installer's.
  "$ROOT/scripts/$script" >"$LOGS/$name.log" 2>&1 || rc=$?
  times >"$LOGS/$name.times" # not in $(…), whose subshell has no children of its own
  cpu=$(awk 'NR == 2 { gsub(/s/, ""); split($1, u, "m"); split($2, s, "m"); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$LOGS/$name.times")
  echo "$name $rc $(( $(date +%s) - start )) $cpu" >"$LOGS/$name.status"
}

start=$(date +%s)
rm -f "$LOGS"/*.status
# Network-bound, beside the builds.
run postgres install-postgres.sh &
run azurite install-azurite.sh &
# CPU-bound Go builds, JOBS at a time, biggest first.
builds=(temporal:install-temporal-server.sh minio:install-minio.sh versitygw:install-versitygw.sh fake-gcs-server:install-fake-gcs-server.sh)
pids=()
for b in "${builds[@]}"; do
  while :; do # wait for a free build slot
    live=()
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && live+=("$p"); done
    pids=("${live[@]}")
    (( ${#pids[@]} < JOBS )) && break
    sleep 1
  done
  run "${b%%:*}" "${b#*:}" &
  pids+=("$!")
done
wait

failed=0
printf '%-16s %-6s %8s %8s\n' installer status wall-s cpu-s >&2
for f in "$LOGS"/*.status; do
  read -r name rc secs cpu <"$f"
  printf '%-16s %-6s %8s %8s\n' "$name" "$([[ $rc == 0 ]] && echo ok || echo FAIL)" "$secs" "${cpu:--}" >&2
  if [[ $rc != 0 ]]; then failed=1; tail -n 20 "$LOGS/$name.log" >&2; fi
done
echo "install-servers: $(( $(date +%s) - start ))s in all" >&2
[[ $failed == 0 ]] || exit 1
echo "$ROOT/.cache/bin"
