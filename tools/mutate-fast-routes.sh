#!/usr/bin/env bash
# Mutation check of the fast routes (docs/ARCHITECTURE.md, "The hot paths"): in a scratch clone of HEAD,
# change each fast route in a small way, rebuild with assertions off (debug builds assert every fast
# result against its reference; with them on, a mutant would be caught by the assert, not by the test)
# and run the differential tests. Every mutant must turn FastRouteDifferentialTests red ("killed").
# Slow (one incremental build per mutant); not part of the test command.
# Usage: tools/mutate-fast-routes.sh [NAME...]     (only the mutants whose name contains one of these words)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-route-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT
git clone -q . "$work/repo"
cd "$work/repo"
flags=(-Xswiftc -assert-config -Xswiftc Release)
# name | file | the text | what it becomes (python str.replace, first occurrence only)
mutants=(
  'pong route|Sources/Core/RelayProtocol/RelayMessage.swift|            self = .pong\n|            self = .ping\n'
  'canonical event route|Sources/Core/RelayProtocol/MessagePayloads.swift|        sourceDeviceId = f.sourceDeviceId\n|        sourceDeviceId = f.targetDeviceId\n'
  'canonical literal comparison|Sources/Core/RelayProtocol/RelayFrameReader.swift|        while k < n {\n|        while k < n - 1 {\n'
  'canonical rpc.response route|Sources/Core/RelayProtocol/RelayMessage.swift|isFinal: f.isFinal, traceparent|isFinal: !f.isFinal, traceparent'
  'deferred event route|Sources/Core/RelayProtocol/RelayMessage.swift|try self.init(decoding: fast.value, deferredEventPayload: fast.deferred)|try self.init(decoding: fast.value, deferredEventPayload: nil)'
  'TimelineUpdated(raw:) direct read|Sources/Core/RelayProtocol/Events.swift|            revision = n\n|            revision = n &+ 1\n'
  'heartbeat writer|Sources/Core/RelayProtocol/RelayMessage.swift|return #"{"payload":{},"type":"heartbeat"}"#|return #"{"payload":{}, "type":"heartbeat"}"#'
  'rpc.request writer|Sources/Core/RelayProtocol/RelayMessage.swift|#","idempotencyKey":"#|#", "idempotencyKey":"#'
  'client event writer|Sources/Core/RelayProtocol/RelayMessage.swift|#"},"type":"event"}"#|#"}, "type":"event"}"#'
  'input reader|Sources/Recording/Capture/InputFastPath.swift|case "heartbeat": return .timerFired(.heartbeat(gen))|case "heartbeat": return .timerFired(.watchdog(gen))'
  'action writer|Sources/Recording/Capture/ActionBytes.swift|            w.int(deadline.nanoseconds)\n            w.key("timer")|            w.int(deadline.nanoseconds \&+ 1)\n            w.key("timer")'
)
echo "baseline build (assertions off)..."
swift build --build-tests "${flags[@]}" >"$work/build.txt" 2>&1 || { tail -20 "$work/build.txt"; exit 1; }
if ! swift test --skip-build --filter FastRouteDifferentialTests >"$work/out.txt" 2>&1; then
  echo "the unmutated code fails the differential tests"; tail -20 "$work/out.txt"; exit 1
fi
killed=0; survived=0
for m in "${mutants[@]}"; do
  IFS='|' read -r name file from to <<<"$m"
  if [ $# -gt 0 ]; then
    wanted=0; for w in "$@"; do case "$name" in *"$w"*) wanted=1 ;; esac; done
    [ "$wanted" = 1 ] || continue
  fi
  git checkout -q -- Sources
  if ! python3 - "$file" "$from" "$to" <<'PY'
import sys
path, a, b = sys.argv[1], sys.argv[2].replace('\\n', '\n'), sys.argv[3].replace('\\n', '\n').replace('\\&', '&')
s = open(path).read()
if a not in s: sys.exit(1)
open(path, 'w').write(s.replace(a, b, 1))
PY
  then echo "NOT APPLIED: $name"; survived=$((survived + 1)); continue; fi
  if ! swift build --build-tests "${flags[@]}" >"$work/build.txt" 2>&1; then echo "BUILD FAILED: $name"; survived=$((survived + 1)); continue; fi
  if swift test --skip-build --filter FastRouteDifferentialTests >"$work/out.txt" 2>&1; then
    echo "SURVIVED: $name"; survived=$((survived + 1))
  else
    echo "killed ($(grep -c 'recorded an issue' "$work/out.txt") failed expectations): $name"; killed=$((killed + 1))
  fi
done
git checkout -q -- Sources
echo "killed $killed, not killed $survived"
[ "$survived" = 0 ]
