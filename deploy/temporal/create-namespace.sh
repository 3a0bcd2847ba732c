#!/bin/sh
# create-namespace.sh: register a Temporal namespace unless it exists, then wait until the
# frontend serves it and, when it has schedules, their scheduler. docker-compose.yml runs it once in the temporalio/admin-tools image
# (service temporal-namespace); test/deploy runs it natively against the PostgreSQL-backed
# test cluster, twice, to keep it idempotent. Workers register their search attributes
# themselves on start (docs/TEMPORAL.md).
#
# Environment:
#   TEMPORAL_CLI        the temporal CLI                  (temporal)
#   TEMPORAL_ADDRESS    frontend host:port                 (temporal:7233)
#   DEFAULT_NAMESPACE   namespace                          (default)
#   RETENTION           workflow execution retention       (24h, as the test cluster's)
#   ATTEMPTS            tries, 1 s apart, while the frontend starts   (60)
set -eu

cli="${TEMPORAL_CLI:-temporal}"
addr="${TEMPORAL_ADDRESS:-temporal:7233}"
ns="${DEFAULT_NAMESPACE:-default}"
attempts="${ATTEMPTS:-60}"

# retry WHAT CMD...: runs CMD until it succeeds, 1 s apart; fails the script after $attempts tries.
retry() {
  what="$1"
  shift
  n=1
  until "$@"; do
    if [ "$n" -ge "$attempts" ]; then
      echo "create-namespace: $what not served by $addr after $attempts attempts" >&2
      exit 1
    fi
    n=$((n + 1))
    sleep 1
  done
}
quiet() { "$@" >/dev/null 2>&1; }

# served_or_register: the namespace is served; if not, register it (an "already exists" from
# a racing run is fine) and report not yet, so the next try looks again.
served_or_register() {
  quiet "$cli" operator namespace describe --address "$addr" --namespace "$ns" && return 0
  quiet "$cli" operator namespace create --address "$addr" --namespace "$ns" --retention "${RETENTION:-24h}" || true
  return 1
}
retry "namespace $ns" served_or_register

# After a restart on existing volumes the namespace is served seconds before its schedules:
# describing or updating one queries its scheduler workflow, which runs only once the server's
# per-namespace worker polls again ("Not enough hosts", "no poller seen"). Wait until the first
# schedule answers, so the workers' and the schedule job's `schedule ensure` do not time out.
first="$("$cli" schedule list --address "$addr" --namespace "$ns" -o json 2>/dev/null |
  sed -n 's/.*"scheduleId": *"\([^"]*\)".*/\1/p' | head -n 1)"
if [ -n "$first" ]; then
  retry "schedule $first in $ns" quiet "$cli" schedule describe --address "$addr" --namespace "$ns" --schedule-id "$first" --command-timeout 5s
fi
echo "create-namespace: $ns served by $addr${first:+ (schedules too)}"
