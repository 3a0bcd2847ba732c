#!/usr/bin/env bash
# Install MinIO (S3 server) into ./.cache/bin for the storage backend matrix (docs/STORAGE.md).
#
# MinIO is AGPL-3.0: walkeeper only ever runs it as a separate process and never links it.
# MinIO publishes no semver tags, so `@latest` resolves to a pseudo-version; the one below is
# what it resolved to when this was written, pinned so CI and docker-compose run one build.
# ~3-5 min on 2 cores with a cold build cache. Idempotent. Prints the binary path last.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
install_go_binary minio "$VERSION" github.com/minio/minio
