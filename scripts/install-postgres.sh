#!/usr/bin/env bash
# Make PostgreSQL 15 available for the PostgreSQL-backed Temporal test cluster
# (internal/testkit/temporalcluster). Debian's postgresql-15 package, installed with apt-get only
# when no PostgreSQL 15 is found. The cluster runs its own private server on a free loopback
# port (initdb into a temp directory, as the postgres OS user when run as root); the
# package's system service is never used.
# Idempotent. Prints the directory holding initdb/postgres/pg_isready on the last line.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

MAJOR="${POSTGRES_MAJOR:-15}"

find_bin_dir() {
  local d
  if command -v postgres >/dev/null 2>&1; then
    d="$(dirname "$(readlink -f "$(command -v postgres)")")"
    if [[ -x "$d/initdb" ]] && "$d/postgres" --version | grep -q " $MAJOR\."; then
      echo "$d"; return 0
    fi
  fi
  d="/usr/lib/postgresql/$MAJOR/bin"
  [[ -x "$d/initdb" ]] && { echo "$d"; return 0; }
  return 1
}

if dir="$(find_bin_dir)"; then
  echo "PostgreSQL already installed: $("$dir/postgres" --version)" >&2
  echo "$dir"
  exit 0
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-postgres: PostgreSQL $MAJOR not found; install it (Debian: apt-get install postgresql-$MAJOR) or set WALKEEPER_POSTGRES_BIN_DIR" >&2
  exit 1
fi
echo "installing postgresql-$MAJOR (apt-get) ..." >&2
start=$(date +%s)
apt_get update -qq >&2
apt_get install -y -qq --no-install-recommends "postgresql-$MAJOR" >&2
# The package starts a system cluster on port 5432; the tests never use it.
dir="$(find_bin_dir)" || { echo "install-postgres: postgresql-$MAJOR installed but initdb not found" >&2; exit 1; }
echo "installed PostgreSQL $MAJOR in $(( $(date +%s) - start ))s: $("$dir/postgres" --version)" >&2
echo "$dir"
