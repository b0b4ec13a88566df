#!/usr/bin/env bash
# Inspection benchmark (issues 8 and 16): on the 1.1 GB record stream `relaytrace-bench write` makes, in one
# run, every figure of issue 16's "Done when" list against two baselines measured on the same file in the same
# run: `zstd -dc FILE > /dev/null` (decompression alone, one thread) and `zstdcat | jq` on the JSONL export with
# the same filter. Each command runs 3 times, the best wall time counts; peak RSS from GNU time.
# Usage: tools/bench-frames.sh [BYTES] [RUNS]      (defaults 1100000000, 3; tools/bench-frames.sh 100000000 1 is quick)
set -euo pipefail
cd "$(dirname "$0")/.."
BYTES="${1:-1100000000}"
RUNS="${2:-3}"
if [ ! -x /usr/bin/time ]; then
    SUDO=""; if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq time >/dev/null
fi
for tool in zstd jq; do command -v $tool >/dev/null || { echo "bench: $tool is missing (tools/setup.sh installs it)" >&2; exit 1; }; done
swift build -c release --product relaytrace-bench >/dev/null
swift build -c release --product relaytrace >/dev/null
BIN="$(swift build -c release --show-bin-path)"
RT="$BIN/relaytrace"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-bench-frames.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
T="$TMP/big.rtrace"

echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
"$BIN/relaytrace-bench" write "$T" --bytes "$BYTES" --seed 1 >/dev/null
echo "trace: $(stat -c %s "$T") bytes, $("$RT" info "$T" --format json | jq -r '"\(.records) records, \(.chunks) chunks, \(.duration) s"')"
MID=$("$RT" info "$T" --format json | jq -r '.duration / 2 | floor * 10 / 10')
MID1=$(awk -v m="$MID" 'BEGIN { printf "%.1f", m + 1 }')
NMID=$("$RT" info "$T" --format json | jq -r '.records / 2 | floor')

# best SECONDS RSS_KB of RUNS runs of "$@" (stdout to /dev/null); sets B_S and B_RSS
measure() {
    B_S=1e9; B_RSS=0
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f "%e %M" -o "$TMP/t" "$@" >/dev/null 2>"$TMP/err" || { echo "bench: '$*' failed: $(cat "$TMP/err")" >&2; exit 1; }
        read -r s rss < <(tail -1 "$TMP/t")
        B_S=$(awk -v a="$B_S" -v b="$s" 'BEGIN { print (b < a) ? b : a }')
        B_RSS=$(awk -v a="$B_RSS" -v b="$rss" 'BEGIN { print (b > a) ? b : a }')
    done
}


measure zstd -q -dc "$T"; ZSTD=$B_S
echo "zstd -dc FILE > /dev/null (baseline)       $ZSTD s"
measure "$RT" verify "$T"; echo "verify                                     $B_S s, peak RSS $((B_RSS / 1024)) MiB"

printf '\n%-44s %8s %10s %9s %9s\n' "command (stdout to /dev/null)" "wall s" "vs zstd" "vs jq" "RSS MiB"
row() {  # label, seconds, rss, jq seconds or -
    local vj="-"
    [ "$4" != "-" ] && vj=$(awk -v j="$4" -v s="$2" 'BEGIN { printf "%.1fx", j / s }')
    printf '%-44s %8s %9.2fx %9s %9d\n' "$1" "$2" "$(awk -v z="$ZSTD" -v s="$2" 'BEGIN { print z / s }')" "$vj" "$(($3 / 1024))"
}

# The JSONL export, compressed, is what the jq baselines read.
"$RT" export "$T" --format jsonl -o - | zstd -q -3 -T1 -o "$TMP/x.jsonl.zst"
jq_time() { measure sh -c "zstd -q -dc '$TMP/x.jsonl.zst' | jq -c '$1'"; echo "$B_S"; }
JQ_TYPE=$(jq_time 'select(.type == "heartbeat")')
JQ_GREP=$(jq_time 'select(tojson | contains("session.list"))')
JQ_WIN=$(jq_time "select(.t >= $MID and .t <= $MID1)")

measure "$RT" frames "$T" --type heartbeat --format jsonl; TYPE=$B_S; row "frames --type heartbeat --format jsonl" "$B_S" "$B_RSS" "$JQ_TYPE"
measure "$RT" frames "$T" --grep session.list; row "frames --grep session.list" "$B_S" "$B_RSS" "$JQ_GREP"
measure "$RT" stats "$T"; row "stats" "$B_S" "$B_RSS" "-"
measure "$RT" frames "$T" --since "$MID" --until "$MID1"; WIN=$B_S; row "frames --since $MID --until $MID1 (1 s, jsonl)" "$B_S" "$B_RSS" "$JQ_WIN"
measure "$RT" frames "$T" --since "$MID" --until "$MID1" --format raw; row "frames --since $MID --until $MID1 --format raw" "$B_S" "$B_RSS" "-"
measure "$RT" frames "$T" --since "$MID" --until "$MID1" --type heartbeat; row "  ... --type heartbeat (jsonl)" "$B_S" "$B_RSS" "-"
measure sh -c "'$RT' frames '$T' --since $MID --until $MID1 | head -1"; row "seek: first record of that window" "$B_S" "$B_RSS" "-"
measure "$RT" show "$T" "$NMID"; row "seek: show $NMID (the middle record)" "$B_S" "$B_RSS" "-"
measure env RELAYTRACE_SCAN_WORKERS=0 "$RT" frames "$T" --type heartbeat --format jsonl; row "frames --type heartbeat, plain reader" "$B_S" "$B_RSS" "$JQ_TYPE"
measure env RELAYTRACE_SCAN_WORKERS=1 "$RT" frames "$T" --type heartbeat --format jsonl; row "frames --type heartbeat, 1 decoding thread" "$B_S" "$B_RSS" "$JQ_TYPE"
echo
echo "jq baselines (zstdcat FILE.jsonl.zst | jq -c FILTER): type $JQ_TYPE s, grep $JQ_GREP s, window $JQ_WIN s"
echo "lines: --type heartbeat $("$RT" frames "$T" --type heartbeat --format jsonl | wc -l), window $("$RT" frames "$T" --since "$MID" --until "$MID1" | wc -l), grep $("$RT" frames "$T" --grep session.list | wc -l)"
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
