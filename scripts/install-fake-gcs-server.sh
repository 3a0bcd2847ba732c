#!/usr/bin/env bash
# Install fake-gcs-server (GCS JSON/XML API emulator) into ./.cache/bin for the storage backend
# matrix (docs/STORAGE.md). Idempotent. Prints the binary path last.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${FAKE_GCS_SERVER_VERSION:-v1.56.1}"
if installed fake-gcs-server "$VERSION"; then echo "$BIN_DIR/fake-gcs-server"; exit 0; fi
need_go
echo "building fake-gcs-server $VERSION (first run only) ..." >&2
start=$(date +%s)
go_install "$VERSION" github.com/fsouza/fake-gcs-server
mark_installed fake-gcs-server "$VERSION" $(( $(date +%s) - start ))
echo "$BIN_DIR/fake-gcs-server"
