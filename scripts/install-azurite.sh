#!/usr/bin/env bash
# Install Azurite (Azure Storage emulator; walkeeper uses its blob service) from npm into
# ./.cache/azurite, with a launcher at ./.cache/bin/azurite-blob, for the storage backend
# matrix (docs/STORAGE.md). Needs Node.js and npm. Idempotent. Prints the launcher path last.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${AZURITE_VERSION:-3.37.0}"
if installed azurite-blob "$VERSION"; then echo "$BIN_DIR/azurite-blob"; exit 0; fi
command -v npm >/dev/null || { echo "install-azurite: npm (Node.js) is needed" >&2; exit 1; }
echo "installing Azurite $VERSION from npm (first run only) ..." >&2
start=$(date +%s)
PREFIX="$ROOT/.cache/azurite"
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --omit=dev --loglevel=error "azurite@$VERSION" >&2
# Relative, so the link survives the checkout being moved or its .cache/ being shared.
ln -sf "../azurite/node_modules/.bin/azurite-blob" "$BIN_DIR/azurite-blob"
mark_installed azurite-blob "$VERSION" $(( $(date +%s) - start ))
echo "$BIN_DIR/azurite-blob"
