#!/usr/bin/env bash
# Replay and simulation benchmark (issues 5 and 7): simulate the 24-hour tour on virtual time, then replay
# it strictly; the baseline, in the same script on the same file, is `relaytrace verify` (read, decompress
# and check every record, no replay). Peak RSS from GNU time. Figures go to docs/BENCHMARKS.md.
# Usage: tools/bench-replay.sh [DURATION]     (e.g. 240h: replay memory does not grow with the trace)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-24h}"
if [ ! -x /usr/bin/time ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
fi
swift build -c release --product relaytrace >/dev/null
BIN="$(swift build -c release --show-bin-path)/relaytrace"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-bench-replay.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
TRACE="$TMP/day.rtrace"

best() {  # best wall-clock seconds of 3 runs of a command
    local b=""
    for _ in 1 2 3; do
        local s e
        s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N)
        b=$(python3 -c "a='$b'; t=$e-$s; print(t if a=='' else min(float(a), t))")
    done
    echo "$b"
}

echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
sim=$(best "$BIN" simulate --scenario tour --duration "$DURATION" -o "$TRACE" --force)
records=$("$BIN" info "$TRACE" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])')
bytes=$(stat -c %s "$TRACE")
replay=$(best "$BIN" replay "$TRACE")
verify=$(best "$BIN" verify "$TRACE")
rss() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }  # peak RSS in KiB
replay_rss=$(rss "$BIN" replay "$TRACE")
verify_rss=$(rss "$BIN" verify "$TRACE")
python3 - "$DURATION" "$records" "$bytes" "$sim" "$replay" "$verify" "$replay_rss" "$verify_rss" <<'PY'
import sys
dur, records, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sim, replay, verify = map(float, sys.argv[4:7])
replay_rss, verify_rss = int(sys.argv[7]) / 1024, int(sys.argv[8]) / 1024
print(f"simulate tour --duration {dur}: {sim:.2f} s ({records} records, {size} bytes)")
print(f"replay (strict):               {replay:.2f} s = {records/replay:,.0f} records/s, peak RSS {replay_rss:.1f} MiB")
print(f"verify (baseline: read+check): {verify:.2f} s = {records/verify:,.0f} records/s, peak RSS {verify_rss:.1f} MiB")
print(f"replay / verify time ratio:    {replay/verify:.1f}")
PY
