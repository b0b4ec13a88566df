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
[ -n "${EPOCHREALTIME:-}" ] || { echo "bench: needs bash 5 (EPOCHREALTIME)" >&2; exit 1; }
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

# best SECONDS RSS_KB of RUNS runs of "$@" (stdout to /dev/null); sets B_S and B_RSS. The wall time is
# bash's EPOCHREALTIME (microseconds, read without starting a process) around each run, so it includes
# starting the command and nothing else; the peak RSS comes from one more run under GNU time (whose own
# fork and exec would otherwise count as the command's). MAX_RSS keeps the largest peak of every
# relaytrace command. `measure_fn NAME` times a shell function the same way (no RSS).
MAX_RSS=0
best_of_runs() {
    B_S=1e9
    for _ in $(seq "$RUNS"); do
        local t0 t1
        t0=$EPOCHREALTIME
        "$@" >/dev/null 2>"$TMP/err" || { echo "bench: '$*' failed: $(cat "$TMP/err")" >&2; exit 1; }
        t1=$EPOCHREALTIME
        B_S=$(awk -v a="$t0" -v b="$t1" -v m="$B_S" 'BEGIN { s = b - a; printf "%.4f", (s < m) ? s : m }')
    done
}
measure() {
    /usr/bin/time -f "%M" -o "$TMP/t" "$@" >/dev/null 2>"$TMP/err" || { echo "bench: '$*' failed: $(cat "$TMP/err")" >&2; exit 1; }
    B_RSS=$(tail -1 "$TMP/t")
    best_of_runs "$@"
}
measure_fn() { B_RSS=0; best_of_runs "$@"; }
rt_measure() { measure "$@"; MAX_RSS=$(awk -v a="$MAX_RSS" -v b="$B_RSS" 'BEGIN { print (b > a) ? b : a }'); }


measure_fn zstd -q -dc "$T"; ZSTD=$B_S
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
jq_time() { measure_fn sh -c "zstd -q -dc '$TMP/x.jsonl.zst' | jq -c '$1'"; echo "$B_S"; }
JQ_TYPE=$(jq_time 'select(.type == "heartbeat")')
JQ_GREP=$(jq_time 'select(tojson | contains("session.list"))')
JQ_WIN=$(jq_time "select(.t >= $MID and .t <= $MID1)")

rt_measure "$RT" frames "$T" --type heartbeat --format jsonl; TYPE=$B_S; row "frames --type heartbeat --format jsonl" "$B_S" "$B_RSS" "$JQ_TYPE"
rt_measure "$RT" frames "$T" --grep session.list; GREP=$B_S; row "frames --grep session.list" "$B_S" "$B_RSS" "$JQ_GREP"
rt_measure "$RT" stats "$T"; STATS=$B_S; row "stats" "$B_S" "$B_RSS" "-"
rt_measure "$RT" frames "$T" --since "$MID" --until "$MID1"; WIN=$B_S; row "frames --since $MID --until $MID1 (1 s, table)" "$B_S" "$B_RSS" "$JQ_WIN"
rt_measure "$RT" frames "$T" --since "$MID" --until "$MID1" --format raw; row "frames --since $MID --until $MID1 --format raw" "$B_S" "$B_RSS" "-"
rt_measure "$RT" frames "$T" --since "$MID" --until "$MID1" --type heartbeat; row "  ... --type heartbeat" "$B_S" "$B_RSS" "-"
rt_measure "$RT" stats "$T" --since "$MID" --until "$MID1"; row "stats --since $MID --until $MID1" "$B_S" "$B_RSS" "-"
rt_measure "$RT" show "$T" "$NMID"; SHOW=$B_S; row "seek: show $NMID (the middle record)" "$B_S" "$B_RSS" "-"
# The seek itself: the window's first record in the hands of the reader, from starting relaytrace to the
# first line read back (a process substitution: the clock stops when the line arrives, not when relaytrace
# has noticed the closed pipe and exited; it is reaped outside the timed part).
FIRST=1e9
for _ in $(seq "$RUNS"); do
    t0=$EPOCHREALTIME
    IFS= read -r line < <("$RT" frames "$T" --since "$MID" --until "$MID1")
    t1=$EPOCHREALTIME
    wait $! 2>/dev/null || true
    [ -n "$line" ] || { echo "bench: no first record from the window" >&2; exit 1; }
    FIRST=$(awk -v a="$t0" -v b="$t1" -v m="$FIRST" 'BEGIN { s = b - a; printf "%.4f", (s < m) ? s : m }')
done
row "seek: the window's first record, read back" "$FIRST" 0 "-"
# The same through `| head -n 1`: until relaytrace has seen the closed pipe and both have exited.
first_record() { "$RT" frames "$T" --since "$MID" --until "$MID1" | head -n 1; }
measure_fn first_record; row "  the same, until | head -n 1 and relaytrace exit" "$B_S" 0 "-"
# What starting any process costs in this harness: the floor under the two seek rows.
measure_fn /bin/true; row "(baseline: /bin/true, process start alone)" "$B_S" 0 "-"
measure_fn "$RT" --version; row "(baseline: relaytrace --version)" "$B_S" 0 "-"
rt_measure env RELAYTRACE_SCAN_WORKERS=0 "$RT" frames "$T" --type heartbeat --format jsonl; row "frames --type heartbeat, plain reader" "$B_S" "$B_RSS" "$JQ_TYPE"
rt_measure env RELAYTRACE_SCAN_WORKERS=1 "$RT" frames "$T" --type heartbeat --format jsonl; row "frames --type heartbeat, 1 decoding thread" "$B_S" "$B_RSS" "$JQ_TYPE"
measure "$RT" info "$T"; row "info" "$B_S" "$B_RSS" "-"
echo
echo "jq baselines (zstdcat FILE.jsonl.zst | jq -c FILTER): type $JQ_TYPE s, grep $JQ_GREP s, window $JQ_WIN s"
echo "lines: --type heartbeat $("$RT" frames "$T" --type heartbeat --format jsonl | wc -l), window $("$RT" frames "$T" --since "$MID" --until "$MID1" | wc -l), grep $("$RT" frames "$T" --grep session.list | wc -l)"
echo
echo "done-when (issue 16), this run (the whole 1 s window, $("$RT" frames "$T" --since "$MID" --until "$MID1" | wc -l) records, is the row above: $WIN s):"
verdict() { awk -v v="$2" -v g="$3" -v op="$4" -v label="$1" 'BEGIN { ok = (op == "<") ? (v < g) : (v >= g); printf "  %-46s %10s  goal %s %s  %s\n", label, v, op, g, ok ? "met" : "NOT MET" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
verdict "seek: first record of 1 s from the middle, s" "$FIRST" 0.010 "<"
verdict "seek: show the middle record, seconds" "$SHOW" 0.010 "<"
verdict "--type heartbeat vs zstd -dc" "$(ratio "$ZSTD" "$TYPE")" 0.5 ">="
verdict "--grep session.list vs zstd -dc" "$(ratio "$ZSTD" "$GREP")" 0.5 ">="
verdict "stats vs zstd -dc" "$(ratio "$ZSTD" "$STATS")" 0.5 ">="
verdict "--type vs zstdcat | jq, same filter" "$(ratio "$JQ_TYPE" "$TYPE")" 10 ">="
verdict "--grep vs zstdcat | jq, same filter" "$(ratio "$JQ_GREP" "$GREP")" 10 ">="
verdict "1 s window vs zstdcat | jq, same filter" "$(ratio "$JQ_WIN" "$WIN")" 10 ">="
verdict "peak RSS of every relaytrace command, MiB" "$((MAX_RSS / 1024))" 64 "<"
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
