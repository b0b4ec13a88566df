#!/usr/bin/env bash
# Capture-overhead benchmark (issues 13 and 16), in one run:
# 1. The in-app recorder's cost on the send path of the project's Net client: sends as fast as one thread
#    can over loopback WebSocket, without and with `WireSocket.sent` before each, interleaved rounds; CPU
#    of the sending thread per send, wall time and sends/s, and the whole process's CPU per send (the
#    trace writer's thread included); the recorded/plain ratios.
# 2. The recorder's append alone.
# 3. The trace writer on the tour's record mix (a simulated 24 h tour's records appended again and again,
#    nothing dropped): records/s of wall time and per CPU-second of the writer thread.
# Figures go to docs/BENCHMARKS.md.
# Usage: tools/bench-recorder.sh [SENDS] [ROUNDS] [TOUR_RECORDS]   (defaults 50000 11 5000000)
set -euo pipefail
cd "$(dirname "$0")/.."
for p in relaytrace-wirebench relaytrace-bench relaytrace; do swift build -c release --product $p >/dev/null; done
BIN="$(swift build -c release --show-bin-path)"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-bench-recorder.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
"$BIN/relaytrace-wirebench" recorder --sends "${1:-50000}" --rounds "${2:-11}"
"$BIN/relaytrace-wirebench" append --sends 1000000
"$BIN/relaytrace" simulate --scenario tour --duration 24h --output "$TMP/tour.rtrace" >/dev/null
"$BIN/relaytrace-bench" tour "$TMP/tour.rtrace" "$TMP/out.rtrace" --records "${3:-5000000}"
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
