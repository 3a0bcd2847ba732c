#!/usr/bin/env bash
# Browser check of the Temporal Web UI as a walkeeper user sees it: runs `walkeeper dev` with
# its demo load on a fresh data directory, waits until merges have finished, then opens the
# Web UI in headless Chromium and saves screenshots into docs/screenshots/:
#
#   merges-list.png   a store's merges: Workflows filtered by WalTarget="generic:demo"
#   merge-run.png     one finished MergeWal run's page
#   schedule.png      the walkeeper-sweep schedule
#   sweep-window.png  the running sweep window: its current details list the rounds that
#                     started something and why the rest was skipped
#
# With Node (no npm packages needed) the list's columns are set to walkeeper's search
# attributes first (scripts/screenshot.mjs); without it Chromium's --screenshot takes the
# pages with the Web UI's default columns.
#
# Re-runnable: every run starts from an empty data directory and overwrites the PNGs. Needs
# Go, python3 (to pick free ports) and Chromium (Debian: apt-get install -y chromium; or set
# CHROMIUM=/path/to/chrome). The Temporal CLI is found or built as `walkeeper dev` does.
#
#   ./scripts/screenshots.sh            # WAIT_MERGES=2 TIMEOUT=240 by default
set -euo pipefail
cd "$(dirname "$0")/.."

out=docs/screenshots
wait_merges=${WAIT_MERGES:-2}
timeout=${TIMEOUT:-240}
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [[ -z "$chromium" ]]; then
	echo "screenshots: no Chromium found; install it (apt-get install -y chromium) or set CHROMIUM" >&2
	exit 1
fi

work=$(mktemp -d)
dev_pid=""
cleanup() {
	if [[ -n "$dev_pid" ]] && kill -0 "$dev_pid" 2>/dev/null; then
		kill -INT "$dev_pid" 2>/dev/null || true
		for _ in $(seq 60); do kill -0 "$dev_pid" 2>/dev/null || break; sleep 1; done
		kill -KILL "$dev_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

echo "screenshots: building walkeeper"
go build -o "$work/walkeeper" ./cmd/walkeeper
wk() { WALKEEPER_DEV_DATA="$work/dev" "$work/walkeeper" "$@"; }

echo "screenshots: starting walkeeper dev (log: $work/dev.out)"
"$work/walkeeper" dev --data "$work/dev" --workers 2 --demo-duration 40s --sweep-every 10s \
	--temporal-port "$(free_port)" --ui-port "$(free_port)" --http-port "$(free_port)" \
	>"$work/dev.out" 2>&1 &
dev_pid=$!

deadline=$((SECONDS + timeout))
until [[ -s "$work/dev/dev.json" ]]; do
	if ! kill -0 "$dev_pid" 2>/dev/null || ((SECONDS > deadline)); then
		echo "screenshots: walkeeper dev did not come up:" >&2
		cat "$work/dev.out" >&2
		exit 1
	fi
	sleep 1
done
ui=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ui"])' "$work/dev/dev.json")
echo "screenshots: Web UI at $ui; waiting for $wait_merges finished merges of generic:demo"

merge_url=""
until [[ -n "$merge_url" ]]; do
	if ((SECONDS > deadline)); then
		echo "screenshots: fewer than $wait_merges merges finished in ${timeout}s" >&2
		tail -n 20 "$work/dev.out" >&2
		exit 1
	fi
	sleep 3
	merge_url=$(wk history generic:demo --json --limit 20 2>/dev/null | python3 -c '
import json, sys
runs = [r for r in json.load(sys.stdin) if r["workflow"] == "MergeWal" and r["result"] == "Completed"]
print(runs[0]["url"] if len(runs) >= int(sys.argv[1]) else "")' "$wait_merges" || true)
done
wk history generic:demo --limit 10
echo "screenshots: dev's console now:"
tail -n 3 "$work/dev.out"

# shot FILE URL [COLUMN...]: with Node, through the DevTools protocol (scripts/screenshot.mjs),
# which first sets the workflow list's columns to COLUMN...; without Node, Chromium's own
# --screenshot (default columns).
chromium_flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
	--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars)
node_ws=()
if command -v node >/dev/null; then
	if [[ $(node -e 'console.log(typeof WebSocket)') != function ]]; then node_ws=(--experimental-websocket); fi
fi
shot() {
	local file=$1 url=$2
	shift 2
	echo "screenshots: $file <- $url"
	if command -v node >/dev/null; then
		local port
		port=$(free_port)
		"$chromium" "${chromium_flags[@]}" --user-data-dir="$(mktemp -d -p "$work")" \
			--remote-debugging-port="$port" about:blank >/dev/null 2>&1 &
		local cpid=$!
		for _ in $(seq 50); do
			python3 -c 'import sys,urllib.request; urllib.request.urlopen("http://127.0.0.1:%s/json/version" % sys.argv[1])' "$port" 2>/dev/null && break
			sleep 0.2
		done
		node "${node_ws[@]}" scripts/screenshot.mjs "$port" "$url" "$file" default "$@" || { kill "$cpid"; exit 1; }
		kill "$cpid" 2>/dev/null || true
		wait "$cpid" 2>/dev/null || true
	else
		"$chromium" "${chromium_flags[@]}" --user-data-dir="$(mktemp -d -p "$work")" \
			--virtual-time-budget=15000 --window-size=1600,1000 \
			--screenshot="$file" "$url" >/dev/null 2>&1
	fi
	[[ -s "$file" ]] || { echo "screenshots: no $file written" >&2; exit 1; }
}
mkdir -p "$out"
list_url="$ui/namespaces/default/workflows?query=$(python3 -c 'import urllib.parse; print(urllib.parse.quote("WalTarget=\"generic:demo\""))')"
# The list shows walkeeper's search attributes as columns (empty where a run has none).
shot "$out/merges-list.png" "$list_url" WalTrigger WalPendingAtStart WalReclaimed WalBytesMerged
shot "$out/merge-run.png" "$merge_url"
shot "$out/schedule.png" "$ui/namespaces/default/schedules/walkeeper-sweep"
window=$(wk schedule describe | python3 -c '
import re, sys
m = re.search(r"^running\s+(\S+) \(run (\S+)\)", sys.stdin.read(), re.M)
print("%s/%s" % m.groups() if m else "")')
if [[ -z "$window" ]]; then
	echo "screenshots: no running sweep window" >&2
	exit 1
fi
shot "$out/sweep-window.png" "$ui/namespaces/default/workflows/$window/history"
echo "screenshots: saved $out/merges-list.png $out/merge-run.png $out/schedule.png $out/sweep-window.png"
