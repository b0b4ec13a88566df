#!/usr/bin/env bash
# Inspection benchmark (issue 8): `relaytrace frames` with a type filter on a trace of >= 1 GB of records
# streams in constant memory. The baseline, on the same file in the same script, is `relaytrace verify`
# (read and check every record). Peak RSS from GNU time. Usage: tools/bench-frames.sh [BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
BYTES="${1:-1100000000}"
if [ ! -x /usr/bin/time ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
fi
swift build -c release --product relaytrace-bench >/dev/null
swift build -c release --product relaytrace >/dev/null
BIN="$(swift build -c release --show-bin-path)"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-bench-frames.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
"$BIN/relaytrace-bench" write "$TMP/big.rtrace" --bytes "$BYTES" --seed 1 >/dev/null
ls -l "$TMP/big.rtrace" | awk '{print "trace file: " $5 " bytes"}'
measure() {
    /usr/bin/time -f "%e s, peak RSS %M KiB" "$@" 2>&1 >/dev/null | tail -1
}
echo "verify (baseline):                 $(measure "$BIN/relaytrace" verify "$TMP/big.rtrace")"
echo "frames --type heartbeat --format jsonl: $(measure "$BIN/relaytrace" frames "$TMP/big.rtrace" --type heartbeat --format jsonl)"
echo "frames --type heartbeat | wc -l:   $("$BIN/relaytrace" frames "$TMP/big.rtrace" --type heartbeat --format jsonl | wc -l) lines"
echo "stats:                             $(measure "$BIN/relaytrace" stats "$TMP/big.rtrace")"
