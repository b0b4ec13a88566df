#!/usr/bin/env bash
# Writes the simulated golden traces in Traces/ again (seed 1, each scenario's default duration).
# Run it only when the client's behaviour changes on purpose; the replay tests then pass again.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product relaytrace >/dev/null
for s in tour handshake-timeout watchdog invalid-resume invalid-resume-loop rpc-timeout rpc-timeout-replaced \
         handover background lease ingress-coalesce token-refresh offline-queue link; do
    .build/debug/relaytrace simulate --scenario "$s" --seed 1 -o "Traces/$s.rtrace" --force >/dev/null
    echo "Traces/$s.rtrace"
done
