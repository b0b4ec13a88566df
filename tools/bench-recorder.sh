#!/usr/bin/env bash
# In-app recorder benchmark (issue 13): the cost of `WireSocket.sent` on the send path of the project's
# Net client (CPU time of the sending thread per send, and wall time), without and with recording,
# interleaved in one run; and the recorder's append alone. Figures go to docs/BENCHMARKS.md.
# Usage: tools/bench-recorder.sh [SENDS] [ROUNDS]   (defaults 50000 11)
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product relaytrace-wirebench >/dev/null
BIN="$(swift build -c release --show-bin-path)/relaytrace-wirebench"
echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
"$BIN" recorder --sends "${1:-50000}" --rounds "${2:-11}"
"$BIN" append --sends 1000000
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
