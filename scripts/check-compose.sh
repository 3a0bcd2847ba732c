#!/usr/bin/env bash
# check-compose.sh — validate the deployment files without a container engine.
#
#   scripts/check-compose.sh [COMPOSE_FILE]      (default: docker-compose.yml at the repo root)
#
# 1. `docker-compose -f FILE config -q` (Debian's docker-compose validates the file, its
#    interpolation and its schema without talking to an engine; installed with apt-get when
#    missing and we are root). Exit status 1 if FILE is invalid.
# 2. For the repository's own docker-compose.yml, also:
#    - a deliberately broken copy must be rejected (the validator is not a no-op);
#    - every Dockerfile and bind-mounted file it references exists;
#    - promtool (Debian package prometheus) checks deploy/prometheus.yml and
#      deploy/prometheus-rules.yml and runs the rule unit tests deploy/prometheus-rules.test.yml;
#    - deploy/grafana-dashboard.json is valid JSON and every PromQL expression in it parses.
#
# Exit status: 0 valid, 1 invalid, 2 a tool is missing and cannot be installed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
file="${1:-$root/docker-compose.yml}"

log() { echo "check-compose: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

apt_install() {
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    return 1
  fi
  log "installing $* (apt-get)"
  if ! apt_get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; then
    apt_get update -qq >/dev/null && apt_get install -y -qq --no-install-recommends "$@" >/dev/null
  fi
}

# --- the compose validator -------------------------------------------------------------
compose=()
if command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
elif command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif apt_install docker-compose && command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
else
  log "need docker-compose (Debian: apt-get install docker-compose) or the docker compose plugin"
  exit 2
fi

[[ -f "$file" ]] || fail "$file: no such file"
file="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"
# Validation must not depend on the caller's environment or an .env in the current directory.
validate() { (cd "$(dirname "$1")" && env -u COMPOSE_FILE -u COMPOSE_PROFILES "${compose[@]}" -f "$1" config -q); }

if ! out="$(validate "$file" 2>&1)"; then
  echo "$out" >&2
  fail "$file is not a valid compose file (${compose[*]} config)"
fi
log "ok: $file (${compose[*]} $("${compose[@]}" version --short 2>/dev/null || echo ?))"
[[ "$file" == "$root/docker-compose.yml" ]] || exit 0

# --- the validator rejects a broken file ------------------------------------------------
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sed 's/^services:$/services:\n  broken:\n    image: [unclosed/' "$file" > "$tmp/docker-compose.yml"
if validate "$tmp/docker-compose.yml" >/dev/null 2>&1; then
  fail "the validator accepted a broken compose file; it validates nothing"
fi
printf 'services:\n  x:\n    image: alpine\n    restart: sometimes-maybe\n    healthcheck: {interval: 5}\n' > "$tmp/docker-compose.yml"
if validate "$tmp/docker-compose.yml" >/dev/null 2>&1; then
  fail "the validator accepted a schema violation; it validates nothing"
fi

# --- referenced files exist --------------------------------------------------------------
command -v python3 >/dev/null 2>&1 || apt_install python3 python3-yaml || { log "need python3"; exit 2; }
python3 -c 'import yaml' 2>/dev/null || apt_install python3-yaml || { log "need python3-yaml"; exit 2; }
(cd "$root" && "${compose[@]}" -f "$file" config) > "$tmp/resolved.yml"
python3 - "$tmp/resolved.yml" "$root" <<'PY' || fail "docker-compose.yml references missing files"
import os, sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
root = sys.argv[2]
missing = []
for name, svc in (cfg.get("services") or {}).items():
    build = svc.get("build")
    if isinstance(build, dict):
        ctx = build.get("context", ".")
        df = os.path.join(ctx, build.get("dockerfile", "Dockerfile"))
        if not os.path.isfile(df):
            missing.append(f"{name}: dockerfile {df}")
    for v in svc.get("volumes") or []:
        src = v.get("source") if isinstance(v, dict) else str(v).split(":")[0]
        kind = v.get("type") if isinstance(v, dict) else ("bind" if src.startswith((".", "/")) else "volume")
        if kind == "bind" and not os.path.exists(src):
            missing.append(f"{name}: bind mount {src}")
for m in missing:
    print("check-compose: missing:", m, file=sys.stderr)
sys.exit(1 if missing else 0)
PY

# --- Prometheus config, alert rules and their unit tests ------------------------------------
if ! command -v promtool >/dev/null 2>&1; then
  apt_install prometheus || true
fi
command -v promtool >/dev/null 2>&1 || { log "need promtool (Debian: apt-get install prometheus)"; exit 2; }
deploy="$root/deploy"
promtool check config --syntax-only "$deploy/prometheus.yml" >/dev/null 2>"$tmp/err" ||
  promtool check config "$deploy/prometheus.yml" >/dev/null 2>"$tmp/err" ||
  { cat "$tmp/err" >&2; fail "deploy/prometheus.yml"; }
promtool check rules "$deploy/prometheus-rules.yml" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "deploy/prometheus-rules.yml"; }
(cd "$deploy" && promtool test rules prometheus-rules.test.yml) >"$tmp/out" 2>&1 ||
  { cat "$tmp/out" >&2; fail "deploy/prometheus-rules.test.yml (alert rule unit tests)"; }
log "ok: deploy/prometheus.yml, deploy/prometheus-rules.yml ($(grep -c '^ *- alert:' "$deploy/prometheus-rules.yml") alerts, unit tests pass)"

# --- Grafana dashboard: JSON and PromQL ---------------------------------------------------
python3 - "$deploy/grafana-dashboard.json" "$tmp/dashboard-rules.yml" <<'PY' || fail "deploy/grafana-dashboard.json"
import json, sys, yaml
d = json.load(open(sys.argv[1]))
assert d.get("uid") and d.get("title") and d.get("panels"), "dashboard needs uid, title, panels"
rules, ids = [], set()
for p in d["panels"]:
    assert p["id"] not in ids, f"duplicate panel id {p['id']}"
    ids.add(p["id"])
    for t in p.get("targets", []):
        expr = t["expr"]
        for var, val in (("$__rate_interval", "5m"), ("$instance", ".*"), ("$kind", ".*")):
            expr = expr.replace(var, val)
        assert "$" not in expr, f"unknown variable in {t['expr']}"
        rules.append({"record": f"dashboard:{p['id']}:{t['refId']}", "expr": expr})
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"))
PY
promtool check rules "$tmp/dashboard-rules.yml" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "PromQL in deploy/grafana-dashboard.json"; }
log "ok: deploy/grafana-dashboard.json ($(grep -c '"expr"' "$deploy/grafana-dashboard.json") queries parse)"
