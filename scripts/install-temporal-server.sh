#!/usr/bin/env bash
# Install the Temporal server (the production binary, not the CLI's dev server), its SQL
# schema tool, the Temporal CLI (scripts/install-temporal.sh) and the Temporal UI server into
# ./.cache/bin: the PostgreSQL-backed test cluster (internal/testkit/temporalcluster) runs the
# first two, the dev server and every `temporal` command the CLI, and the compose stage's
# temporalio/ui stand-in the last (scripts/compose-ci.sh).
#
# The CLI embeds the same server release and the same UI server release, so the four are one
# build: a scratch module that requires the releases, and one `go build` of the four commands,
# which compiles every shared package once (two separate `go install`s select different
# versions of x/sys, x/net, grpc's genproto and OpenTelemetry, so they shared almost no
# compiled package: decision 0341). The server and the UI server are built with the CLI's
# dependency versions, which are the ones its own embedded copies of them run with. The UI
# version is the one docker-compose.yml runs (TEMPORAL_UI_SERVER_VERSION overrides it); the
# build fails if the CLI needs another, as it does for the server.
# Binaries are linked without symbol tables and DWARF (-s -w): a panic's stack trace needs
# neither, and it halves the links' CPU (measured: 26 → 13 CPU-s for the first three).
# The PostgreSQL schema files the tool applies are copied from the module cache to
# .cache/temporal-server/VERSION/schema/postgresql/v12, so a later `go clean -modcache` does
# not lose them.
# Idempotent: a no-op when all three are installed; an existing CLI is kept. Prints the server
# binary's path on the last line.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${TEMPORAL_SERVER_VERSION:-v1.29.1}"
CLI_VERSION="${TEMPORAL_CLI_VERSION:-v1.5.1}"
UI_VERSION="${TEMPORAL_UI_SERVER_VERSION:-$(compose_ui_version)}"
SCHEMA="$ROOT/.cache/temporal-server/$VERSION/schema/postgresql/v12"
if installed temporal-server "$VERSION" && installed temporal-sql-tool "$VERSION" && installed temporal-ui-server "$UI_VERSION" &&
  [[ -d "$SCHEMA/visibility/versioned" && -x "$BIN_DIR/temporal" ]]; then
  echo "$BIN_DIR/temporal-server"
  exit 0
fi
need_go
echo "building Temporal server $VERSION, temporal-sql-tool, Temporal CLI $CLI_VERSION and UI server $UI_VERSION (first run only) ..." >&2
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/mod" "$tmp/bin"
(
  cd "$tmp/mod"
  printf 'module walkeeper.local/temporal-build\n\ngo 1.26\n' >go.mod
  export GOFLAGS=-mod=mod CGO_ENABLED=0 GOGC="$BUILD_GOGC"
  go get "go.temporal.io/server@$VERSION" "github.com/temporalio/cli@$CLI_VERSION" "github.com/temporalio/ui-server/v2@$UI_VERSION"
  # The CLI must not have raised the server past VERSION, nor the UI server past UI_VERSION.
  for want in "go.temporal.io/server $VERSION" "github.com/temporalio/ui-server/v2 $UI_VERSION"; do
    got="$(go list -m -f '{{.Version}}' "${want% *}")"
    [[ "$got" == "${want#* }" ]] || { echo "install-temporal-server: Temporal CLI $CLI_VERSION needs ${want% *} $got, not ${want#* }" >&2; exit 1; }
  done
  nice -n 10 go build -buildvcs=false -ldflags='-s -w' -o "$tmp/bin/" \
    go.temporal.io/server/cmd/server go.temporal.io/server/cmd/tools/sql github.com/temporalio/cli/cmd/temporal
  # Its command is also named server; the packages it shares are compiled by now.
  nice -n 10 go build -buildvcs=false -ldflags='-s -w' -o "$tmp/bin/ui-server" github.com/temporalio/ui-server/v2/cmd/server
)
mv "$tmp/bin/server" "$BIN_DIR/temporal-server"
mv "$tmp/bin/sql" "$BIN_DIR/temporal-sql-tool"
mv "$tmp/bin/ui-server" "$BIN_DIR/temporal-ui-server"
[[ -x "$BIN_DIR/temporal" ]] || mv "$tmp/bin/temporal" "$BIN_DIR/temporal"
src="$(go env GOMODCACHE)/go.temporal.io/server@$VERSION/schema/postgresql/v12"
rm -rf "$SCHEMA" && mkdir -p "$(dirname "$SCHEMA")"
cp -R "$src" "$SCHEMA" && chmod -R u+w "$SCHEMA"
secs=$(( $(date +%s) - start ))
mark_installed temporal-server "$VERSION" "$secs"
mark_installed temporal-sql-tool "$VERSION" "$secs"
mark_installed temporal-ui-server "$UI_VERSION" "$secs"
echo "$("$BIN_DIR/temporal" --version)" >&2
echo "$BIN_DIR/temporal-server"
