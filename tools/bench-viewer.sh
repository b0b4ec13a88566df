#!/usr/bin/env bash
# The viewer in a real headless Chromium: page load and redraw times on a 24 h tour trace, against the
# same page on the 3-minute golden tour as the baseline, measured in the browser (performance.now) by
# tools/viewer/browser_checks.py. Release build. Writes nothing; prints the figures for docs/BENCHMARKS.md.
# Usage: tools/bench-viewer.sh
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-browser.sh
swift build -c release --product relaytrace >/dev/null
bin=.build/release/relaytrace
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
/usr/bin/time -f "%e" -o "$work/sim.time" "$bin" simulate --scenario tour --duration 24h -o "$work/day.rtrace" >/dev/null
echo "simulate --scenario tour --duration 24h: $(cat "$work/sim.time") s, $(stat -c %s "$work/day.rtrace") bytes"
for trace in Traces/tour.rtrace "$work/day.rtrace"; do
    "$bin" view "$trace" --listen 127.0.0.1:0 --for 300s >"$work/view.out" 2>&1 &
    pid=$!
    start=$(date +%s.%N)
    url=""
    for _ in $(seq 200); do
        url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$work/view.out" || true)
        [ -n "$url" ] && break
        sleep 0.05
    done
    [ -n "$url" ] || { echo "bench-viewer: relaytrace view did not start: $(cat "$work/view.out")" >&2; exit 1; }
    # From the server's start to the timeline laid out (the list answers before that); at most 120 s.
    for _ in $(seq 6000); do
        curl -s "${url}api/timeline?width=10" | grep -q '"state":"ready"' && break
        sleep 0.02
    done
    echo "== $trace: timeline laid out $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s after the viewer started"
    .venv/bin/python tools/viewer/make_case.py "$url" "method:session.list" >"$work/case.json"
    timeout 300 .venv/bin/python tools/viewer/browser_checks.py "$work/case.json" | grep -E '"check": "(loaded|timing|console)"'
    kill "$pid"
    wait "$pid" 2>/dev/null || true
done
