#!/usr/bin/env bash
# Install the Temporal server (the production binary, not the CLI's dev server), its SQL
# schema tool and the Temporal CLI (scripts/install-temporal.sh) into ./.cache/bin: the
# PostgreSQL-backed test cluster (internal/testkit/temporalcluster) runs the first two, the
# dev server and every `temporal` command the last.
#
# The CLI embeds the same server release, so the three are one build: a scratch module that
# requires both releases, and one `go build` of the three commands, which compiles every shared
# package once (two separate `go install`s select different versions of x/sys, x/net, grpc's
# genproto and OpenTelemetry, so they shared almost no compiled package; the install step's
# wall time did not change beyond the machine's spread: decision 0341). The server is built
# with the CLI's dependency versions, which are the ones its own embedded copy of the same
# server runs with.
# The PostgreSQL schema files the tool applies are copied from the module cache to
# .cache/temporal-server/VERSION/schema/postgresql/v12, so a later `go clean -modcache` does
# not lose them.
# Idempotent: a no-op when all three are installed; an existing CLI is kept. Prints the server
# binary's path on the last line.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${TEMPORAL_SERVER_VERSION:-v1.29.1}"
CLI_VERSION="${TEMPORAL_CLI_VERSION:-v1.5.1}"
SCHEMA="$ROOT/.cache/temporal-server/$VERSION/schema/postgresql/v12"
if installed temporal-server "$VERSION" && installed temporal-sql-tool "$VERSION" && [[ -d "$SCHEMA/visibility/versioned" && -x "$BIN_DIR/temporal" ]]; then
  echo "$BIN_DIR/temporal-server"
  exit 0
fi
need_go
echo "building Temporal server $VERSION, temporal-sql-tool and Temporal CLI $CLI_VERSION (first run only) ..." >&2
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/mod" "$tmp/bin"
(
  cd "$tmp/mod"
  printf 'module walkeeper.local/temporal-build\n\ngo 1.26\n' >go.mod
  export GOFLAGS=-mod=mod CGO_ENABLED=0
  go get "go.temporal.io/server@$VERSION" "github.com/temporalio/cli@$CLI_VERSION"
  # The CLI must not have raised the server past VERSION.
  got="$(go list -m -f '{{.Version}}' go.temporal.io/server)"
  [[ "$got" == "$VERSION" ]] || { echo "install-temporal-server: Temporal CLI $CLI_VERSION needs server $got, not $VERSION" >&2; exit 1; }
  nice -n 10 go build -buildvcs=false -o "$tmp/bin/" \
    go.temporal.io/server/cmd/server go.temporal.io/server/cmd/tools/sql github.com/temporalio/cli/cmd/temporal
)
mv "$tmp/bin/server" "$BIN_DIR/temporal-server"
mv "$tmp/bin/sql" "$BIN_DIR/temporal-sql-tool"
[[ -x "$BIN_DIR/temporal" ]] || mv "$tmp/bin/temporal" "$BIN_DIR/temporal"
src="$(go env GOMODCACHE)/go.temporal.io/server@$VERSION/schema/postgresql/v12"
rm -rf "$SCHEMA" && mkdir -p "$(dirname "$SCHEMA")"
cp -R "$src" "$SCHEMA" && chmod -R u+w "$SCHEMA"
secs=$(( $(date +%s) - start ))
mark_installed temporal-server "$VERSION" "$secs"
mark_installed temporal-sql-tool "$VERSION" "$secs"
echo "$("$BIN_DIR/temporal" --version)" >&2
echo "$BIN_DIR/temporal-server"
