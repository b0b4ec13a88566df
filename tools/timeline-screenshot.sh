#!/usr/bin/env bash
# Renders `relaytrace timeline TRACE --html` in headless Chromium and saves a screenshot, then checks
# the page drew its lanes (the DOM dumped by Chromium holds one data-lane group per lane).
# Usage: tools/timeline-screenshot.sh TRACE [OUT.png]   (not part of the test command)
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:?usage: tools/timeline-screenshot.sh TRACE [OUT.png]}
out=${2:-timeline.png}
browser=""
for b in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [ -z "$browser" ]; then
    echo "timeline-screenshot: no Chromium found (apt-get install -y chromium)" >&2
    exit 2
fi
bin=${RELAYTRACE:-.build/debug/relaytrace}
html=$(mktemp --suffix=.html)
trap 'rm -f "$html"' EXIT
"$bin" timeline "$trace" --html "$html" >/dev/null
flags=(--headless --disable-gpu --no-sandbox --hide-scrollbars --window-size=1400,700)
"$browser" "${flags[@]}" --screenshot="$out" "file://$html" >/dev/null 2>&1
dom=$("$browser" "${flags[@]}" --dump-dom "file://$html" 2>/dev/null)
lanes=$(grep -o 'data-lane="[^"]*"' <<<"$dom" | sort -u | wc -l)
size=$(stat -c %s "$out" 2>/dev/null || echo 0)
if [ "$lanes" -lt 1 ] || [ "$size" -lt 5000 ]; then
    echo "timeline-screenshot: FAILED: $lanes lanes in the DOM, screenshot $size bytes" >&2
    exit 1
fi
echo "timeline-screenshot: OK: $lanes lanes, $out ($size bytes)"
