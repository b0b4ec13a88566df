#!/usr/bin/env bash
# The main job (README.md): set-up, a release build, then a real session of the relay client captured
# over real sockets (wss on loopback, against the embedded development relay and simulated desktop),
# shown and replayed. Extra arguments go to `relaytrace capture` (e.g. --scenario lease --duration 60s).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
swift build -c release --product relaytrace >/dev/null
bin=.build/release/relaytrace
mkdir -p out
trace=out/capture.rtrace
"$bin" capture --scenario tour --duration 20s -o "$trace" --force "$@"
echo
"$bin" info "$trace"
echo
"$bin" verify "$trace"
echo
echo "The frames (relaytrace frames $trace --format table):"
"$bin" frames "$trace" --format table --color never | grep -v ' action ' | head -40
echo
"$bin" replay "$trace"
