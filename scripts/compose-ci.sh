#!/usr/bin/env bash
# compose-ci.sh — run docker-compose.yml for real: CI's compose stage (.ci/run runs it beside
# the tests, once the servers are installed; WALKEEPER_SKIP_COMPOSE=1 skips it).
#
#   scripts/compose-ci.sh
#   scripts/compose-ci.sh --prepare   only step 1's packages and the Debian rootfs below: what
#                                     needs the network and little CPU, which .ci/run starts
#                                     beside the installs. No daemon is started.
#   scripts/compose-ci.sh --image-key DOCKERFILE CONTEXT [build args]
#                                     print the key an image built from these is kept under
#                                     (step 2) and exit: test/deploy checks what it depends on.
#
# 1. The engine: installs Debian's docker.io, docker-compose and mmdebstrap when missing
#    (apt-get, as root) and starts dockerd in the background unless one answers.
# 2. Images, all built here (no registry is reached): a Debian rootfs from mmdebstrap, and on
#    it stand-ins for the images the project does not build: the Go and Alpine bases of
#    deploy/Dockerfile, postgres:15, temporalio/server, temporalio/admin-tools,
#    temporalio/ui and versity/versitygw, tagged with the names docker-compose.yml uses and
#    built from the same release binaries CI runs natively (.cache/bin) and the same upstream
#    templates (test/deploy/images/; docs/RELIABILITY.md "Deployment files" lists every difference). An image
#    whose inputs did not change is kept (label walkeeper.ci.key), so a warm run builds nothing.
#    The walkeeper image is built first, from deploy/Dockerfile by `docker-compose build`, the
#    way the file's header says, with GO_IMAGE and BASE_IMAGE naming the stand-in bases; then
#    the server binaries are installed (waiting for a scripts/install-servers.sh that is
#    installing them) and the other stand-ins built from them.
# 3. `docker-compose -p wk up -d` of the shipped docker-compose.yml; waits until every service
#    is healthy and every one-shot exited 0 (prints each one's time), runs the walkthrough in
#    the file's header comment (prints the answers), finds the MergeWal with the Temporal CLI;
#    then `down`, `up` again on the same volumes (must be healthy again, the one-shots must
#    exit 0 again, the merged rows must still be there), and `down -v`.
# Any failure prints the failing services' logs and exits 1.
#
# Environment:
#   WALKEEPER_COMPOSE_PROJECT   compose project name                          (wk)
#   WALKEEPER_COMPOSE_TIMEOUT   seconds to wait for the stack to be healthy   (300)
#   WALKEEPER_COMPOSE_KEEP=1    leave the stack (and a dockerd this script started) running on
#                               failure, to look at it
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install-lib.sh"

# image_key DOCKERFILE CONTEXT [docker build args]: what an image is kept under (label
# walkeeper.ci.key): the Dockerfile, every context file's path, mode and content, and the
# build args (which carry the base images' ids). Contents, not mtimes: a clean clone's scripts
# are new files with the same bytes, and rebuilding an image for them cost a minute of sending
# its context. Modes, since COPY keeps them: an entrypoint that lost its executable bit must
# not be kept in an image built when it had it.
image_key() {
  local df=$1 ctx=$2
  shift 2
  { sha256sum <"$df"
    (cd "$ctx" && find . -type f -printf '%m %p\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
    printf '%s\n' "$@"; } |
    sha256sum | cut -c1-16
}
if [[ "${1:-}" == "--image-key" ]]; then
  shift
  image_key "$@"
  exit 0
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
prepare_only=""
[[ "${1:-}" == "--prepare" ]] && prepare_only=1
# The engine's own client first: another docker client on PATH may need plugins the engine lacks.
export PATH="/usr/bin:/usr/sbin:$PATH"
cache="$root/.cache/compose-ci"
mkdir -p "$cache/bin" "$cache/logs"
project="${WALKEEPER_COMPOSE_PROJECT:-wk}"
timeout="${WALKEEPER_COMPOSE_TIMEOUT:-300}"
stage_start=$(date +%s)

log() { echo "compose-ci: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
quiet() { nice -n 15 ionice -c3 "$@"; }
since() { echo "$(( $(date +%s) - $1 ))s"; }

# --- 1. the engine ------------------------------------------------------------------------
need=()
[[ -x /usr/bin/docker && -x /usr/sbin/dockerd ]] || need+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v curl >/dev/null 2>&1 || need+=(curl)
if ((${#need[@]})); then
  [[ "$(id -u)" == 0 ]] || die "need ${need[*]} (apt-get install as root)"
  log "installing ${need[*]} (apt-get)"
  (apt_get update -qq && apt_get install -y -qq --no-install-recommends "${need[@]}" iptables ca-certificates) \
    >"$cache/logs/apt.log" 2>&1 || { cat "$cache/logs/apt.log" >&2; die "apt-get install ${need[*]}"; }
fi

# The Debian rootfs every stand-in image starts from, as a tarball (imported below).
mmdebstrap_args=(--variant=minbase --include=ca-certificates,busybox,tzdata bookworm)
deb_key="$(printf '%s\n' "${mmdebstrap_args[@]}" | sha256sum | cut -c1-16)"
tarball="$cache/debian-bookworm-$deb_key.tar"
if [[ ! -f "$tarball" ]]; then
  log "mmdebstrap ${mmdebstrap_args[*]} (first run only)"
  # mmdebstrap picks the output format from the name: keep .tar last. One run at a time: a
  # stage that finds the preparation's run still going waits for it.
  flock "$cache/mmdebstrap.lock" bash -c '[[ -f "$1" ]] || { nice -n 15 ionice -c3 mmdebstrap "${@:3}" "$2" && mv "$2" "$1"; }' _ \
    "$tarball" "${tarball%.tar}.partial.tar" "${mmdebstrap_args[@]}" >"$cache/logs/mmdebstrap.log" 2>&1 ||
    { tail -30 "$cache/logs/mmdebstrap.log" >&2; die "mmdebstrap"; }
fi
if [[ -n "$prepare_only" ]]; then
  log "prepared: engine packages and the Debian rootfs in $(since "$stage_start")"
  exit 0
fi
# A dockerd this script starts is stopped when it ends, so the stage leaves no daemon behind.
dockerd_pid=""
stop_dockerd() {
  [[ -n "$dockerd_pid" ]] || return 0
  kill "$dockerd_pid" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$dockerd_pid" 2>/dev/null || return 0; sleep 1; done
  log "dockerd ($dockerd_pid) did not stop within 30s"
}
trap stop_dockerd EXIT
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: .cache/compose-ci/logs/dockerd.log)"
  # Niced, with every build and container it starts: in CI the stage runs beside the tests.
  setsid nice -n 10 dockerd >"$cache/logs/dockerd.log" 2>&1 </dev/null &
  dockerd_pid=$!
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -30 "$cache/logs/dockerd.log" >&2; die "dockerd did not answer within 60s"; }
fi
log "engine: docker $(docker version -f '{{.Server.Version}}'), $(docker-compose version --short)"

# --- 2. images ------------------------------------------------------------------------------
# stage NAME FILE...: a fresh build context .cache/compose-ci/ctx/NAME holding FILEs, each
# "SRC" or "SRC=NAME_IN_CONTEXT" (hard links where the file system allows, else copies).
stage() {
  local ctx="$cache/ctx/$1"
  shift
  rm -rf "$ctx" && mkdir -p "$ctx"
  local f src dst
  for f in "$@"; do
    src="${f%%=*}"
    dst="$ctx/$(basename "${f#*=}")"
    [[ "$f" == *=* ]] || dst="$ctx/$(basename "$src")"
    cp -a -l "$src" "$dst" 2>/dev/null || cp -a "$src" "$dst"
  done
}

# build_image TAG DOCKERFILE CONTEXT [docker build args]: builds unless TAG exists with the
# same image_key.
build_image() {
  local tag=$1 df=$2 ctx=$3
  shift 3
  local key have
  key="$(image_key "$df" "$ctx" "$@")"
  have="$(docker image inspect -f '{{ index .Config.Labels "walkeeper.ci.key" }}' "$tag" 2>/dev/null || true)"
  if [[ "$have" == "$key" ]]; then
    log "image $tag: cached"
    return 0
  fi
  local t0 name
  t0=$(date +%s)
  name="$(echo "$tag" | tr '/:' '__')"
  DOCKER_BUILDKIT=1 quiet docker build --progress=plain --label "walkeeper.ci.key=$key" -t "$tag" -f "$df" "$@" "$ctx" \
    >"$cache/logs/build-$name.log" 2>&1 || { tail -40 "$cache/logs/build-$name.log" >&2; die "building $tag"; }
  log "image $tag: built in $(since "$t0")"
}
image_id() { docker image inspect -f '{{.Id}}' "$1"; }

images_start=$(date +%s)
# The Debian rootfs every stand-in starts from.
debian=walkeeper-ci/debian:bookworm
if [[ "$(docker image inspect -f '{{ index .Config.Labels "walkeeper.ci.key" }}' "$debian" 2>/dev/null || true)" != "$deb_key" ]]; then
  docker import --change "LABEL walkeeper.ci.key=$deb_key" --change 'CMD ["/bin/bash"]' "$tarball" "$debian" >/dev/null
  log "image $debian: imported"
else
  log "image $debian: cached"
fi
images=test/deploy/images
alpine=walkeeper-ci/alpine:3.22
stage alpine
on_debian=(--build-arg "DEBIAN_IMAGE=$debian" --label "walkeeper.ci.base=$(image_id "$debian")")
build_image "$alpine" "$images/alpine.Dockerfile" "$cache/ctx/alpine" "${on_debian[@]}"
on_alpine=(--build-arg "ALPINE_IMAGE=$alpine" --label "walkeeper.ci.base=$(image_id "$alpine")")
golang=walkeeper-ci/golang:1.26
stage golang "$(go env GOROOT)=go" "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}=ca-certificates.crt"
build_image "$golang" "$images/go.Dockerfile" "$cache/ctx/golang" "${on_alpine[@]}"

# The walkeeper image first, from deploy/Dockerfile, by docker-compose itself (one service: the
# others name the same image): it is the stage's one long build and needs no server binary,
# so under .ci/run it compiles while the servers install. BuildKit's cache makes an unchanged
# tree a no-op.
t0=$(date +%s)
DOCKER_BUILDKIT=1 COMPOSE_DOCKER_CLI_BUILD=1 quiet docker-compose -p "$project" build \
  --build-arg "GO_IMAGE=$golang" --build-arg "BASE_IMAGE=$alpine" worker-0 >"$cache/logs/build-walkeeper.log" 2>&1 ||
  { tail -60 "$cache/logs/build-walkeeper.log" >&2; die "docker-compose build (deploy/Dockerfile)"; }
log "image walkeeper/walkeeper:dev: deploy/Dockerfile built in $(since "$t0")"

# The release binaries and upstream files the other stand-ins are made of. One installer at a
# time: under .ci/run the test command's scripts/install-servers.sh holds the lock while it
# builds them, and these find them installed.
# The Temporal build also makes the UI server, at the UI version docker-compose.yml names.
flock "$root/.cache/install-servers.lock" bash -c './scripts/install-temporal-server.sh && ./scripts/install-temporal.sh && ./scripts/install-versitygw.sh' >/dev/null ||
  die "installing the Temporal server, CLI and versitygw"
bin="$root/.cache/bin"
temporal_version="$(compose_version temporalio/server TEMPORAL_VERSION)"
ui_version="$(compose_ui_version)"
[[ "$(cat "$bin/.temporal-ui-server.version")" == "$ui_version" ]] ||
  die "the installed UI server is not $ui_version, the version docker-compose.yml runs"

# dockerize: rebuilt when its source changes (replace only a different binary, so the images
# built from it stay cached).
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$cache/bin/dockerize.new" ./test/deploy/images/dockerize
if cmp -s "$cache/bin/dockerize.new" "$cache/bin/dockerize"; then rm "$cache/bin/dockerize.new"; else mv "$cache/bin/dockerize.new" "$cache/bin/dockerize"; fi
module_dir() { go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'; }
server_mod="$(module_dir "go.temporal.io/server@$temporal_version")"
ui_mod="$(module_dir "github.com/temporalio/ui-server/v2@$ui_version")"

# The third-party images docker-compose.yml runs, under the names it uses.
compose_image() { docker-compose -f docker-compose.yml config | python3 -c 'import sys,yaml; print(yaml.safe_load(sys.stdin)["services"][sys.argv[1]]["image"])' "$1"; }
stage postgres "$images/postgres-entrypoint.sh"
build_image "$(compose_image postgresql)" "$images/postgres.Dockerfile" "$cache/ctx/postgres" "${on_debian[@]}"
stage admin-tools "$bin/temporal-sql-tool" "$bin/temporal" "$root/.cache/temporal-server/$temporal_version/schema"
build_image "$(compose_image temporal-schema)" "$images/admin-tools.Dockerfile" "$cache/ctx/admin-tools" "${on_alpine[@]}"
stage server "$bin/temporal-server" "$cache/bin/dockerize" "$server_mod/docker/config_template.yaml" \
  "$server_mod/config/dynamicconfig/docker.yaml=dynamicconfig-docker.yaml" "$images/temporal-entrypoint.sh"
build_image "$(compose_image temporal)" "$images/temporal-server.Dockerfile" "$cache/ctx/server" "${on_alpine[@]}"
stage ui "$bin/temporal-ui-server=ui-server" "$ui_mod/docker/start-ui-server.sh" "$ui_mod/config/docker.yaml"
build_image "$(compose_image temporal-ui)" "$images/ui.Dockerfile" "$cache/ctx/ui" "${on_alpine[@]}"
stage versitygw "$bin/versitygw"
build_image "$(compose_image s3)" "$images/versitygw.Dockerfile" "$cache/ctx/versitygw" "${on_alpine[@]}"
log "images ready in $(since "$images_start")"

# --- 3. the stack ---------------------------------------------------------------------------
dc() { docker-compose -p "$project" "$@"; }
# The default set: services without a profile (observability's need `--profile`).
services=($(dc config | python3 -c 'import sys,yaml; print(" ".join(n for n, s in yaml.safe_load(sys.stdin)["services"].items() if not s.get("profiles")))'))
oneshots=(temporal-schema temporal-namespace schedule)
is_oneshot() { [[ " ${oneshots[*]} " == *" $1 "* ]]; }

dump() {
  log "docker-compose ps:"
  dc ps >&2 || true
  local s cid state
  for s in "${services[@]}"; do
    cid="$(dc ps -q "$s" 2>/dev/null || true)"
    [[ -n "$cid" ]] || { log "--- $s: no container"; continue; }
    state="$(docker inspect -f '{{.State.Status}} exit={{.State.ExitCode}} health={{if .State.Health}}{{.State.Health.Status}}{{end}}' "$cid")"
    if [[ "$state" != *"health=healthy"* ]] && ! [[ "$state" == "exited exit=0 "* ]]; then
      log "--- $s ($state): last 80 log lines"
      dc logs --no-color --tail 80 "$s" >&2 || true
    fi
  done
}
# up_pid is a `docker-compose up -d` still running (it waits for the services a service
# depends on to be healthy): a failure stops it before `down`, which would otherwise race it.
up_pid=""
cleanup() {
  local rc=$?
  if [[ -n "$up_pid" ]]; then
    kill "$up_pid" 2>/dev/null || true
    wait "$up_pid" 2>/dev/null || true
  fi
  if ((rc != 0)); then
    dump
    if [[ "${WALKEEPER_COMPOSE_KEEP:-}" == 1 ]]; then
      log "leaving project $project running (WALKEEPER_COMPOSE_KEEP=1)"
      dockerd_pid=""
      return
    fi
  fi
  dc down -v --remove-orphans >/dev/null 2>&1 || true
  stop_dockerd
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# up_and_wait LABEL: `up -d` in the background while every service is watched (one
# `docker inspect` a second): every long-running service must get healthy and every one-shot
# exit 0. Prints the seconds from the `up` until each got there, in that order.
up_and_wait() {
  local label=$1 uplog="$cache/logs/up-${1// /-}.log"
  local t0 deadline s svc status code health max restarts
  t0=$(date +%s)
  deadline=$(( t0 + timeout ))
  dc up -d >"$uplog" 2>&1 &
  up_pid=$!
  declare -A done_at=()
  while ((${#done_at[@]} < ${#services[@]})); do
    if [[ -n "$up_pid" ]] && ! kill -0 "$up_pid" 2>/dev/null; then
      local up_rc=0
      wait "$up_pid" || up_rc=$?
      up_pid=""
      ((up_rc == 0)) || { cat "$uplog" >&2; die "$label: docker-compose up failed"; }
    fi
    local ids
    ids="$(docker ps -aq --filter "label=com.docker.compose.project=$project")"
    if [[ -n "$ids" ]]; then
      while read -r svc status code health max restarts; do
        [[ -n "$svc" && -z "${done_at[$svc]:-}" ]] || continue
        if is_oneshot "$svc"; then
          if [[ "$status" == exited && "$code" == 0 ]]; then
            done_at[$svc]=$(( $(date +%s) - t0 ))
          elif [[ "$status" == exited ]] && ((max > 0 && restarts >= max)); then
            die "$label: $svc exited $code after $restarts restarts"
          fi
        elif [[ "$status" == running && "$health" == healthy ]]; then
          done_at[$svc]=$(( $(date +%s) - t0 ))
        fi
      done < <(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} {{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{else}}-{{end}} {{.HostConfig.RestartPolicy.MaximumRetryCount}} {{.RestartCount}}' $ids)
    fi
    if (( $(date +%s) >= deadline )); then
      die "$label: not ready after ${timeout}s: waiting for $(for s in "${services[@]}"; do [[ -n "${done_at[$s]:-}" ]] || printf '%s ' "$s"; done)"
    fi
    sleep 1
  done
  if [[ -n "$up_pid" ]]; then
    local up_rc=0
    wait "$up_pid" || up_rc=$?
    up_pid=""
    ((up_rc == 0)) || { cat "$uplog" >&2; die "$label: docker-compose up failed"; }
  fi
  for s in "${services[@]}"; do
    if is_oneshot "$s"; then
      printf '%4d compose-ci: %s: %-20s exited 0 after %3ss\n' "${done_at[$s]}" "$label" "$s" "${done_at[$s]}"
    else
      printf '%4d compose-ci: %s: %-20s healthy after %3ss\n' "${done_at[$s]}" "$label" "$s" "${done_at[$s]}"
    fi
  done | sort -n -s | cut -c6- >&2
  # A one-shot that exited 0 only after restarts, or a worker that could not ensure its
  # schedules, is a failure the restart policy or a warning hid.
  for s in "${oneshots[@]}"; do
    restarts="$(docker inspect -f '{{.RestartCount}}' "$(dc ps -q "$s")")"
    ((restarts == 0)) || { dc logs --no-color --tail 20 "$s" >&2; die "$label: $s exited 0 only after $restarts restarts"; }
  done
  if dc logs --no-color worker-0 worker-1 worker-2 | grep 'could not ensure' >&2; then
    die "$label: a worker could not ensure its schedules"
  fi
}

dc down -v --remove-orphans >/dev/null 2>&1 || true
log "docker-compose -p $project up -d (services: ${services[*]})"
up_and_wait "first up"

# The Web UI's API answers the browser pages it serves (TEMPORAL_CORS_ORIGINS), and no other site.
ui_origin() { curl -sS --max-time 30 -o /dev/null -D - -H "Origin: $1" http://127.0.0.1:8080/api/v1/settings | tr -d '\r' | sed -n 's/^[Aa]ccess-[Cc]ontrol-[Aa]llow-[Oo]rigin: //p'; }
[[ "$(ui_origin http://localhost:8080)" == http://localhost:8080 ]] || die "the Web UI's API refuses its own origin http://localhost:8080 (TEMPORAL_CORS_ORIGINS)"
[[ -z "$(ui_origin http://localhost:3000)" ]] || die "the Web UI's API allows another site's origin http://localhost:3000"
log "Web UI: its API allows http://localhost:8080 and refuses http://localhost:3000"

# The walkthrough of the header comment, as written there; curl fails on an HTTP error here.
walkthrough="$(awk '/^# Try it:/ {on=1; next} on && /^#$/ {exit} on {sub(/^# */, ""); print}' docker-compose.yml)"
[[ -n "$walkthrough" ]] || die "no walkthrough (# Try it:) in docker-compose.yml's header"
answers="$cache/logs/walkthrough.out"
WALKTHROUGH="$walkthrough" bash -c '
  set -euo pipefail
  curl() { command curl -sS --fail-with-body --max-time 300 "$@"; echo; }
  cmd=""
  while IFS= read -r line; do
    [[ -n "$line" ]] || continue
    cmd+="${line%\\}"
    [[ "$line" == *\\ ]] && continue
    [[ "$cmd" == curl* ]] && echo "\$ $cmd" >&2
    eval "$cmd"
    cmd=""
  done <<<"$WALKTHROUGH"
' >"$answers" || { cat "$answers" >&2; die "the walkthrough in docker-compose.yml's header failed"; }
grep -v '^$' "$answers" | sed 's/^/compose-ci: answer: /' >&2
base="$(grep -v "^$" "$answers" | tail -n 1)"
python3 - "$base" <<'PY' || die "the base after the merge is not the rows appended: $base"
import json, sys
rows = {r["id"]: r for r in json.loads(sys.argv[1])["rows"]}
assert set(rows) == {"a", "b"} and rows["b"]["n"] == 3 and rows["a"]["n"] in (1, 2), rows
PY

# The merge in Temporal, as an operator finds it.
# Visibility is eventually consistent: the completed run may take a moment to be listed; a
# listing that fails or times out is tried again, like an empty one.
: >"$cache/logs/workflow-list.log"
wf=""
for _ in $(seq 30); do
  wf="$("$bin/temporal" workflow list --address 127.0.0.1:7233 --namespace default --command-timeout 10s \
    --query "WorkflowType='MergeWal' AND ExecutionStatus='Completed'" -o json 2>>"$cache/logs/workflow-list.log" | python3 -c '
import json, sys
text = sys.stdin.read().strip()
try:
    items = json.loads(text) if text else []
except ValueError:
    items = [json.loads(l) for l in text.splitlines() if l.strip()]
if isinstance(items, dict):
    items = [items]
print(" ".join(w["execution"]["workflowId"] for w in items))')" || wf=""
  [[ -z "$wf" ]] || break
  sleep 1
done
[[ -n "$wf" ]] || { tail -5 "$cache/logs/workflow-list.log" >&2; die "temporal workflow list finds no completed MergeWal"; }
log "MergeWal in Temporal: $wf"

# Restart on the same volumes: the schema and namespace steps run again and must leave them.
dc down >/dev/null 2>&1 || die "docker-compose down"
up_and_wait "second up"
again="$(curl -sS --fail-with-body --max-time 60 'localhost:8083/api/v1/stores/generic/demo/rows?source=base')"
[[ "$again" == "$base" ]] || die "after the second up the base reads $again, before it read $base"
log "second up: the base still reads $again"

dc down -v --remove-orphans >"$cache/logs/down.log" 2>&1 || { cat "$cache/logs/down.log" >&2; die "docker-compose down -v"; }
trap stop_dockerd EXIT
log "ok: compose stage in $(since "$stage_start")"
