#!/usr/bin/env bash
# Proxy benchmark (issue 13): round-trip latency and throughput through `RecordingProxy` (recording to a
# wire trace) against the same client and server directly, interleaved in one run. The server is the
# project's Net WebSocket server echoing every message (the development relay limits text frames to
# 25/s per connection, PROTOCOL.md, so it cannot measure throughput). Figures go to docs/BENCHMARKS.md.
# Usage: tools/bench-proxy.sh [ROUND_TRIPS] [MESSAGES] [ROUNDS]   (defaults 5000 50000 3)
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product relaytrace-wirebench >/dev/null
BIN="$(swift build -c release --show-bin-path)/relaytrace-wirebench"
echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
"$BIN" proxy --round-trips "${1:-5000}" --messages "${2:-50000}" --rounds "${3:-3}"
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
