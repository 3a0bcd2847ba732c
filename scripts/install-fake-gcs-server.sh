#!/usr/bin/env bash
# Install fake-gcs-server (GCS JSON/XML API emulator) into ./.cache/bin for the storage backend
# matrix (docs/STORAGE.md). Idempotent. Prints the binary path last.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${FAKE_GCS_SERVER_VERSION:-v1.56.1}"
install_go_binary fake-gcs-server "$VERSION" github.com/fsouza/fake-gcs-server
