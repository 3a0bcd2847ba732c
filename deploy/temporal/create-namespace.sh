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

n=1
until "$cli" operator namespace describe --address "$addr" --namespace "$ns" >/dev/null 2>&1; do
  # Not served yet: register it (an "already exists" from a racing run is fine), and look again.
  "$cli" operator namespace create --address "$addr" --namespace "$ns" --retention "${RETENTION:-24h}" >/dev/null 2>&1 || true
  if [ "$n" -ge "$attempts" ]; then
    echo "create-namespace: namespace $ns not served by $addr after $attempts attempts" >&2
    exit 1
  fi
  n=$((n + 1))
  sleep 1
done

# After a restart on existing volumes the namespace is served seconds before its schedules:
# describing or updating one queries its scheduler workflow, which runs only once the server's
# per-namespace worker polls again ("Not enough hosts", "no poller seen"). Wait until the first
# schedule answers, so the workers' and the schedule job's `schedule ensure` do not time out.
first="$("$cli" schedule list --address "$addr" --namespace "$ns" -o json 2>/dev/null |
  sed -n 's/.*"scheduleId": *"\([^"]*\)".*/\1/p' | head -n 1)"
if [ -n "$first" ]; then
  n=1
  until "$cli" schedule describe --address "$addr" --namespace "$ns" --schedule-id "$first" --command-timeout 5s >/dev/null 2>&1; do
    if [ "$n" -ge "$attempts" ]; then
      echo "create-namespace: schedule $first in $ns not served by $addr after $attempts attempts" >&2
      exit 1
    fi
    n=$((n + 1))
    sleep 1
  done
fi
echo "create-namespace: $ns served by $addr${first:+ (schedules too)}"
