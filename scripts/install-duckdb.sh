#!/usr/bin/env bash
# install-duckdb.sh — install what test/duckdb needs: Node.js (>= 18) with npm, and the npm
# packages locked in test/duckdb/package-lock.json (@duckdb/node-api and its prebuilt DuckDB
# binding) into test/duckdb/node_modules.
#
# Idempotent and safe to run concurrently (flock): does nothing when the pinned version is
# already installed. Node and npm come from Debian (apt-get) when missing and we are root.
# test/duckdb/duckdb_test.go runs this script itself when node_modules is missing, so tests
# never depend on a manual install.
#
#   scripts/install-duckdb.sh [--force]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/test/duckdb"
force=0
[[ "${1:-}" == "--force" ]] && force=1

log() { echo "install-duckdb: $*" >&2; }

node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
    node -e 'process.exit(parseInt(process.versions.node, 10) >= 18 ? 0 : 1)'
}

if ! node_ok; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing nodejs and npm from Debian"
    apt_get update -qq
    apt_get install -y -qq nodejs npm >/dev/null
  fi
  if ! node_ok; then
    log "need Node.js >= 18 and npm on PATH (Debian: apt-get install nodejs npm)"
    exit 1
  fi
fi

# The version package.json pins (exact), and the one installed, if any.
want="$(cd "$dir" && node -p 'require("./package.json").dependencies["@duckdb/node-api"]')"
have() {
  (cd "$dir" && node -p 'try { require("./node_modules/@duckdb/node-api/package.json").version } catch { "" }')
}

exec 9>"$dir/.install.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi

if [[ "$force" == 0 && "$(have)" == "$want" ]]; then
  exit 0
fi

log "npm ci in $dir (@duckdb/node-api $want)"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)

# Prove the native binding loads and can read Parquet, not only that files were unpacked.
(cd "$dir" && node --input-type=module -e '
import { DuckDBInstance } from "@duckdb/node-api";
const db = await DuckDBInstance.create(":memory:");
const c = await db.connect();
const r = await c.runAndReadAll("SELECT version() AS v, count(*) AS n FROM duckdb_functions() WHERE function_name = '\''read_parquet'\''");
const row = r.getRowObjectsJson()[0];
if (Number(row.n) < 1) { console.error("read_parquet missing"); process.exit(1); }
console.error("install-duckdb: DuckDB " + row.v + " ready");
c.closeSync(); db.closeSync();
')
[[ "$(have)" == "$want" ]] || { log "installed $(have), want $want"; exit 1; }
