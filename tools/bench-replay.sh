#!/usr/bin/env bash
# Replay and simulation benchmark (issues 5 and 7): simulate the 24-hour tour on virtual time, then replay
# it strictly; the baseline, in the same script on the same file, is `relaytrace verify` (read, decompress
# and check every record, no replay). Then the same session as a wire trace (its socket records only,
# `relaytrace-bench wire-view`) replayed into the model (issue 14), against the strict replay's speed.
# Peak RSS from GNU time. Figures go to docs/BENCHMARKS.md.
# Usage: tools/bench-replay.sh [DURATION]     (e.g. 240h: replay memory does not grow with the trace)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-24h}"
if [ ! -x /usr/bin/time ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
fi
swift build -c release --product relaytrace >/dev/null
swift build -c release --product relaytrace-bench >/dev/null
BIN="$(swift build -c release --show-bin-path)/relaytrace"
BENCH="$(swift build -c release --show-bin-path)/relaytrace-bench"
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
WIRE="$TMP/day-wire.rtrace"
"$BENCH" wire-view "$TRACE" "$WIRE" >/dev/null
wire_records=$("$BIN" info "$WIRE" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])')
wire=$(best "$BIN" replay "$WIRE")   # exits 0: the model agrees with its own wire
wire_rss=$(rss "$BIN" replay "$WIRE")
python3 - "$DURATION" "$records" "$bytes" "$sim" "$replay" "$verify" "$replay_rss" "$verify_rss" "$wire_records" "$wire" "$wire_rss" <<'PY'
import sys
dur, records, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sim, replay, verify = map(float, sys.argv[4:7])
replay_rss, verify_rss = int(sys.argv[7]) / 1024, int(sys.argv[8]) / 1024
wire_records, wire, wire_rss = int(sys.argv[9]), float(sys.argv[10]), int(sys.argv[11]) / 1024
print(f"simulate tour --duration {dur}: {sim:.2f} s ({records} records, {size} bytes)")
print(f"replay (strict):               {replay:.2f} s = {records/replay:,.0f} records/s, peak RSS {replay_rss:.1f} MiB")
print(f"verify (baseline: read+check): {verify:.2f} s = {records/verify:,.0f} records/s, peak RSS {verify_rss:.1f} MiB")
print(f"replay / verify time ratio:    {replay/verify:.1f}")
print(f"wire replay of the same session: {wire:.2f} s = {wire_records/wire:,.0f} records/s ({wire_records} socket records), peak RSS {wire_rss:.1f} MiB")
print(f"wire / strict replay time ratio: {wire/replay:.1f} (per record: {(wire/wire_records)/(replay/records):.1f})")
PY
