#!/bin/sh
# setup-postgres.sh: create Temporal's two PostgreSQL databases (persistence and SQL
# visibility) and bring both schemas to the server's version with temporal-sql-tool.
#
# One script for both set-ups, so that what CI proves is what `docker compose up` runs:
#   - docker-compose.yml runs it once in the temporalio/admin-tools image (service
#     temporal-schema) before the server starts;
#   - internal/testkit/temporalcluster runs it natively before every PostgreSQL-backed test cluster.
#
# Every step is idempotent (create-database, setup-schema --version 0.0 and update-schema
# leave a database that is already at the target version as it is), so a second
# `docker compose up` on the same volume, or an upgrade to a newer server's schema directory,
# runs the same script.
#
# Environment (defaults are the admin-tools image's and docker-compose.yml's):
#   SQL_TOOL            temporal-sql-tool binary                (temporal-sql-tool)
#   SCHEMA_DIR          the server's schema/postgresql/v12       (/etc/temporal/schema/postgresql/v12)
#   POSTGRES_SEEDS      host                                     (postgresql)
#   DB_PORT             port                                     (5432)
#   POSTGRES_USER       user                                     (temporal)
#   POSTGRES_PWD        password                                 (empty)
#   DBNAME              persistence database                     (temporal)
#   VISIBILITY_DBNAME   visibility database                      (temporal_visibility)
#   CONNECT_ATTEMPTS    tries, 1 s apart, until PostgreSQL accepts (60)
set -eu

tool="${SQL_TOOL:-temporal-sql-tool}"
schema_dir="${SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}"
attempts="${CONNECT_ATTEMPTS:-60}"

sql() {
  db="$1"
  shift
  "$tool" --plugin postgres12 --endpoint "${POSTGRES_SEEDS:-postgresql}" --port "${DB_PORT:-5432}" \
    --user "${POSTGRES_USER:-temporal}" --password "${POSTGRES_PWD:-}" --database "$db" "$@"
}

# PostgreSQL may still be starting (compose orders by health, a restart does not wait):
# the first step is retried, a later failure is the schema's and fails the script.
n=1
until sql "${DBNAME:-temporal}" create-database; do
  if [ "$n" -ge "$attempts" ]; then
    echo "setup-postgres: PostgreSQL at ${POSTGRES_SEEDS:-postgresql}:${DB_PORT:-5432} not reachable after $attempts attempts" >&2
    exit 1
  fi
  n=$((n + 1))
  sleep 1
done

for pair in "${DBNAME:-temporal}:temporal" "${VISIBILITY_DBNAME:-temporal_visibility}:visibility"; do
  db="${pair%%:*}"
  dir="$schema_dir/${pair#*:}/versioned"
  sql "$db" create-database
  sql "$db" setup-schema --version 0.0
  sql "$db" update-schema --schema-dir "$dir"
  echo "setup-postgres: $db at the schema of $dir"
done
