#!/usr/bin/env bash
# Install the Temporal server (the production binary, not the CLI's dev server) and its SQL
# schema tool into ./.cache/bin, for the PostgreSQL-backed test cluster (internal/testkit/temporalcluster).
#
# Both come from the go.temporal.io/server module, so one `go install` builds them together
# (~4-6 min on 2 cores with a cold build cache). The PostgreSQL schema files the tool applies
# are copied from the module cache to .cache/temporal-server/VERSION/schema/postgresql/v12, so
# a later `go clean -modcache` does not lose them.
# Idempotent. Prints the server binary's path on the last line.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${TEMPORAL_SERVER_VERSION:-v1.29.1}"
SCHEMA="$ROOT/.cache/temporal-server/$VERSION/schema/postgresql/v12"
if installed temporal-server "$VERSION" && installed temporal-sql-tool "$VERSION" && [[ -d "$SCHEMA/visibility/versioned" ]]; then
  echo "$BIN_DIR/temporal-server"
  exit 0
fi
need_go
echo "building Temporal server $VERSION and temporal-sql-tool (first run only) ..." >&2
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The packages are named server and sql; build into a scratch dir and give them clear names.
GOBIN_DIR="$tmp" go_install "$VERSION" go.temporal.io/server/cmd/server go.temporal.io/server/cmd/tools/sql
mv "$tmp/server" "$BIN_DIR/temporal-server"
mv "$tmp/sql" "$BIN_DIR/temporal-sql-tool"
src="$(go env GOMODCACHE)/go.temporal.io/server@$VERSION/schema/postgresql/v12"
rm -rf "$SCHEMA" && mkdir -p "$(dirname "$SCHEMA")"
cp -R "$src" "$SCHEMA" && chmod -R u+w "$SCHEMA"
secs=$(( $(date +%s) - start ))
mark_installed temporal-server "$VERSION" "$secs"
mark_installed temporal-sql-tool "$VERSION" "$secs"
echo "$BIN_DIR/temporal-server"
