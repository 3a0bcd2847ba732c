#!/usr/bin/env bash
# Install versitygw (Apache-2.0 S3 gateway, run on its posix backend) into ./.cache/bin for the
# storage backend matrix (docs/STORAGE.md). Idempotent. Prints the binary path last.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${VERSITYGW_VERSION:-v1.8.0}"
install_go_binary versitygw "$VERSION" github.com/versity/versitygw/cmd/versitygw
