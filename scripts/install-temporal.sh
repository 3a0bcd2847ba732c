#!/usr/bin/env bash
# Install the Temporal CLI (which runs the local dev server and its Web UI) into ./.cache/bin.
#
# Idempotent: does nothing when .cache/bin/temporal is already there. Builds from source with
# `go install` (CGO off, ~2-3 min on a cold Go cache), because v1.5.1 is the newest CLI release
# that `go install` accepts; it embeds Temporal Server 1.29.1 and Web UI 2.42.1.
# Prints the binary's path on the last line.
set -euo pipefail

VERSION="${TEMPORAL_CLI_VERSION:-v1.5.1}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="$ROOT/.cache/bin"
BIN="$BIN_DIR/temporal"

if [[ -x "$BIN" ]]; then
  echo "Temporal CLI already installed: $("$BIN" --version 2>/dev/null || echo unknown version)" >&2
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { echo "install-temporal: the go command is needed (Go 1.26+)" >&2; exit 1; }
mkdir -p "$BIN_DIR"
echo "building Temporal CLI $VERSION (first run only, ~2-3 min) into $BIN_DIR ..." >&2
start=$(date +%s)
GOBIN="$BIN_DIR" CGO_ENABLED=0 GOFLAGS= GOGC="$BUILD_GOGC" go install -ldflags='-s -w' "github.com/temporalio/cli/cmd/temporal@$VERSION"
echo "built in $(( $(date +%s) - start ))s: $("$BIN" --version)" >&2
echo "$BIN"
