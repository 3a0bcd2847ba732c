# Shared helpers for the scripts/install-*.sh scripts. Source it; do not run it.
#
# Every installer puts its binaries into $ROOT/.cache/bin and records the version it built in
# $ROOT/.cache/bin/.NAME.version, so a later run with the same version does nothing and a run
# with a new version rebuilds. Installers print the installed binary's path on their last line
# (stdout); everything else goes to stderr.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="$ROOT/.cache/bin"
mkdir -p "$BIN_DIR"

# apt_get ARGS...: apt-get under one lock file, so the installers, check-compose.sh and the
# compose stage's preparation, which .ci/run starts beside them, never meet at dpkg's lock
# (apt-get fails at once when another apt-get holds it).
apt_get() {
  DEBIAN_FRONTEND=noninteractive flock "$ROOT/.cache/apt.lock" apt-get "$@"
}

# installed NAME VERSION: true when $BIN_DIR/NAME exists and was built at VERSION.
installed() {
  local name=$1 version=$2
  [[ -x "$BIN_DIR/$name" && -f "$BIN_DIR/.$name.version" && "$(cat "$BIN_DIR/.$name.version")" == "$version" ]]
}

# mark_installed NAME VERSION SECONDS: records the version and how long the install took.
mark_installed() {
  local name=$1 version=$2 secs=$3
  echo "$version" >"$BIN_DIR/.$name.version"
  echo "installed $name $version in ${secs}s" >&2
}

# BUILD_GOGC: the compiler collects garbage four times less often than by default, for 15-25 %
# less CPU per build at a few hundred MB more per compile (decision 0371).
BUILD_GOGC="${GOGC:-400}"

need_go() {
  command -v go >/dev/null || { echo "install: the go command is needed (Go 1.26+)" >&2; exit 1; }
}

# go_install VERSION PKG...: go install of one or more packages of ONE module at VERSION
# (go install accepts several packages per call only when they share module and version).
# Installs into $GOBIN_DIR when set, else $BIN_DIR. Runs under nice so a build never starves tests running next to it.
# Links without symbol tables and DWARF (-s -w): a server's panic trace needs neither.
go_install() {
  local version=$1; shift
  local args=()
  for p in "$@"; do args+=("$p@$version"); done
  GOBIN="${GOBIN_DIR:-$BIN_DIR}" CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOGC="$BUILD_GOGC" nice -n 10 go install -ldflags='-s -w' "${args[@]}"
}

# install_go_binary NAME VERSION PKG: the whole install of a server that is one Go binary
# named NAME, built from PKG at VERSION: nothing when already installed at VERSION; prints the
# binary's path last.
install_go_binary() {
  local name=$1 version=$2 pkg=$3
  if installed "$name" "$version"; then echo "$BIN_DIR/$name"; return 0; fi
  need_go
  echo "building $name $version (first run only) ..." >&2
  local start
  start=$(date +%s)
  go_install "$version" "$pkg"
  mark_installed "$name" "$version" $(( $(date +%s) - start ))
  echo "$BIN_DIR/$name"
}

# compose_version IMAGE VAR: the default tag docker-compose.yml gives IMAGE
# (`image: IMAGE:${VAR:-TAG}`), as a module version (vTAG).
compose_version() {
  echo "v$(sed -n "s|^ *image: $1:\\\${$2:-\\([^}]*\\)}.*|\\1|p" "$ROOT/docker-compose.yml")"
}

# compose_ui_version: the Temporal UI release docker-compose.yml runs (v2.42.1); the Temporal
# build makes its UI server for the compose stage's image.
compose_ui_version() { compose_version temporalio/ui TEMPORAL_UI_VERSION; }
