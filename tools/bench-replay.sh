#!/usr/bin/env bash
# Replay and simulation benchmark (issues 5 and 7): simulate the 24-hour tour on virtual time, then replay
# it strictly; the baseline, in the same script on the same file, is `relaytrace verify` (read, decompress
# and check every record, no replay). Figures go to docs/BENCHMARKS.md. Usage: tools/bench-replay.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-24h}"
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
python3 - "$DURATION" "$records" "$bytes" "$sim" "$replay" "$verify" <<'PY'
import sys
dur, records, size, sim, replay, verify = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *map(float, sys.argv[4:])
print(f"simulate tour --duration {dur}: {sim:.2f} s ({records} records, {size} bytes)")
print(f"replay (strict):               {replay:.2f} s = {records/replay:,.0f} records/s")
print(f"verify (baseline: read+check): {verify:.2f} s = {records/verify:,.0f} records/s")
print(f"replay / verify time ratio:    {replay/verify:.1f}")
PY
