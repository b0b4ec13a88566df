#!/usr/bin/env bash
# Screenshots of `relaytrace view` for the docs, in headless Chromium (tools/setup-browser.sh installs it
# and selenium): starts the viewer on TRACE, writes PREFIX-overview.png, PREFIX-zoomed.png and
# PREFIX-filtered.png (default prefix: viewer), then stops it.
# Usage: tools/viewer-screenshot.sh TRACE [PREFIX] [FILTER]   (not part of the test command)
#   e.g. tools/viewer-screenshot.sh Traces/tour.rtrace docs/viewer
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:?usage: tools/viewer-screenshot.sh TRACE [PREFIX] [FILTER]}
prefix=${2:-viewer}
filter=${3:-type:rpc.request,rpc.response}
./tools/setup-browser.sh
bin=${RELAYTRACE:-.build/debug/relaytrace}
out=$(mktemp)
"$bin" view "$trace" --listen 127.0.0.1:0 --for 120s >"$out" 2>&1 &
viewer=$!
trap 'kill "$viewer" 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 100); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$out" || true)
    [ -n "$url" ] && break
    sleep 0.1
done
if [ -z "$url" ]; then
    echo "viewer-screenshot: relaytrace view did not start:" >&2
    cat "$out" >&2
    exit 1
fi
.venv/bin/python tools/viewer/screenshot.py "$url" "$prefix" "$filter"
