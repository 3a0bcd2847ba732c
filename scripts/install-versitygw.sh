#!/usr/bin/env bash
# Install versitygw (Apache-2.0 S3 gateway, run on its posix backend) into ./.cache/bin for the
# storage backend matrix (docs/STORAGE.md). Idempotent. Prints the binary path last.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${VERSITYGW_VERSION:-v1.8.0}"
if installed versitygw "$VERSION"; then echo "$BIN_DIR/versitygw"; exit 0; fi
need_go
echo "building versitygw $VERSION (first run only) ..." >&2
start=$(date +%s)
go_install "$VERSION" github.com/versity/versitygw/cmd/versitygw
mark_installed versitygw "$VERSION" $(( $(date +%s) - start ))
echo "$BIN_DIR/versitygw"
