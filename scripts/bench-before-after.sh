#!/usr/bin/env bash
# bench-before-after.sh — rerun a before/after comparison of docs/BENCHMARKS.md: build the
# "before" benchmark binary from a named commit (a git worktree in a temporary directory under
# .cache/, then go build), the "after" binary from the current tree, and run one bench
# scenario with both, alternating, in one invocation (so machine drift hits both alike). The
# benchmark binary is cmd/walkeeper-bench; a commit from before it existed builds cmd/walkeeper
# and runs `walkeeper bench`. Each binary runs in its own source tree, so it reads that
# commit's data files (deploy/temporal/dynamicconfig.yaml for the PostgreSQL cluster). Each
# run writes its own --out directory; a summary of every run's targets and values is printed
# at the end.
#
#   scripts/bench-before-after.sh [--reps N] [--after COMMIT] [--out DIR] BEFORE_COMMIT SCENARIO [bench flags...]
#
#   scripts/bench-before-after.sh ac8da43 merge-throughput --reps 5
#   scripts/bench-before-after.sh --reps 3 ac8da43 commit-lock --quick
#
# --reps N (default 1) is the number of alternating rounds (before, after, after, before, ...);
# the scenario's own --reps goes among the bench flags. --after COMMIT builds "after" from a
# commit too instead of the work tree. Output: DIR (default .cache/before-after/<scenario>-<time>)
# holds before-<i>/ and after-<i>/ (each a --out of the scenario) and the two binaries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

rounds=1 after="" out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) rounds=${2:?}; shift 2 ;;
    --after) after=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    --*) echo "bench-before-after: unknown flag $1 (bench flags go after the scenario)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ $# -ge 2 ]] || usage
before=$1 scenario=$2
shift 2
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench-before-after: --reps wants a positive number, got $rounds" >&2; exit 2; }
git rev-parse --verify --quiet "$before^{commit}" >/dev/null || { echo "bench-before-after: unknown commit $before" >&2; exit 2; }
[[ -z "$after" ]] || git rev-parse --verify --quiet "$after^{commit}" >/dev/null || { echo "bench-before-after: unknown commit $after" >&2; exit 2; }

mkdir -p .cache
out=${out:-.cache/before-after/$scenario-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "$root/.cache/bench-before-after.XXXXXX")
cleanup() {
  for wt in "$tmp"/src-*; do
    [[ -d "$wt" ]] && git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1
  done
  rm -rf "$tmp"
  git -C "$root" worktree prune
}
trap cleanup EXIT

# build COMMIT|"" NAME: go build the benchmark binary at COMMIT (a detached worktree) or from
# the work tree, into $out/walkeeper-NAME; $out/walkeeper-NAME.sub holds the sub-command
# before the scenario ("bench" for a commit whose bench is `walkeeper bench`, else empty).
build() {
  local commit=$1 name=$2 src=$root
  if [[ -n "$commit" ]]; then
    src="$tmp/src-$name"
    git -C "$root" worktree add --detach --quiet "$src" "$commit"
    # The commit's servers and Go caches are the work tree's; its data files (the Temporal
    # dynamic config a cluster starts with) are its own.
    ln -s "$root/.cache" "$src/.cache"
  fi
  echo "$src" >"$out/walkeeper-$name.src"
  echo "bench-before-after: building $name from ${commit:-the work tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', modified'))}" >&2
  if [[ -d "$src/cmd/walkeeper-bench" ]]; then
    (cd "$src" && go build -o "$out/walkeeper-$name" ./cmd/walkeeper-bench)
    : >"$out/walkeeper-$name.sub"
  else
    (cd "$src" && go build -o "$out/walkeeper-$name" ./cmd/walkeeper)
    echo bench >"$out/walkeeper-$name.sub"
  fi
  if [[ -n "$commit" ]]; then
    git -C "$src" rev-parse --short HEAD >"$out/walkeeper-$name.commit"
  fi
}
build "$before" before
build "$after" after

for ((i = 1; i <= rounds; i++)); do
  order=(before after)
  (( i % 2 == 0 )) && order=(after before)
  for side in "${order[@]}"; do
    sub=$(cat "$out/walkeeper-$side.sub")
    echo "bench-before-after: round $i/$rounds: $side: walkeeper-$side ${sub:+$sub }$scenario $* --out $out/$side-$i" >&2
    (cd "$(cat "$out/walkeeper-$side.src")" &&
      "$out/walkeeper-$side" ${sub:+"$sub"} "$scenario" "$@" --out "$out/$side-$i" >"$out/$side-$i.md")
  done
done

echo
echo "## $scenario: before = $(cat "$out/walkeeper-before.commit"), after = $(cat "$out/walkeeper-after.commit" 2>/dev/null || echo "work tree at $(git rev-parse --short HEAD)")"
echo "Command: scripts/bench-before-after.sh --reps $rounds $before $scenario $*"
echo "Results: $out"
for ((i = 1; i <= rounds; i++)); do
  for side in before after; do
    echo
    echo "### $side, round $i"
    if [[ -f "$out/$side-$i/$scenario.json" ]] && command -v python3 >/dev/null; then
      python3 - "$out/$side-$i/$scenario.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for t in r.get("targets") or []:
    print(f"- target {t['name']}: goal {t['goal']}, measured {t['measured']}, met {t['met']}")
vals = r.get("values") or {}
print("- values: " + ", ".join(f"{k}={vals[k]:.4g}" for k in sorted(vals)))
EOF
    else
      cat "$out/$side-$i.md"
    fi
  done
done
