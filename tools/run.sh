#!/usr/bin/env bash
# The main job (README.md): set-up, a release build, then a session of the relay client recorded into a
# trace and shown. Extra arguments go to `relaytrace simulate` (e.g. --scenario lease --seed 7).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
swift build -c release --product relaytrace >/dev/null
bin=.build/release/relaytrace
mkdir -p out
trace=out/tour.rtrace
"$bin" simulate --scenario tour -o "$trace" "$@"
echo
"$bin" info "$trace"
echo
"$bin" verify "$trace"
echo
echo "First frames (relaytrace frames $trace --format table):"
"$bin" frames "$trace" --format table | head -40
