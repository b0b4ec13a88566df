#!/usr/bin/env bash
# Strict replay and the frames listing, before and after a change, in one run on the same files: builds
# `relaytrace` in release at BASE and at AFTER (default HEAD; scratch clones), simulates the 24 h tour once, writes a
# record stream once (`relaytrace-bench write`), then alternates the two binaries: `replay` of the tour
# (best and median of RUNS, records/s) and `frames --format jsonl` of the stream (best and median of RUNS), each round in a
# shuffled order, and counts the instructions of the replay and of a frames listing of a 20 MB stream
# under callgrind (deterministic, not disturbed by load). Prints HEAD/BASE ratios.
# Usage: tools/bench-before-after.sh BASE [AFTER] [RUNS] [BYTES]     (e.g. tools/bench-before-after.sh 167ef45 HEAD 5 200000000)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="$1"; AFTER="${2:-HEAD}"; RUNS="${3:-5}"; BYTES="${4:-200000000}"
[ -n "${EPOCHREALTIME:-}" ] || { echo "bench: needs bash 5 (EPOCHREALTIME)" >&2; exit 1; }
command -v valgrind >/dev/null || { SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo; DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq valgrind >/dev/null; }
TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-before-after.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
HEAD_REV=$(git rev-parse --short "$AFTER"); BASE_REV=$(git rev-parse --short "$BASE")
for side in base head; do
    rev=$([ $side = base ] && echo "$BASE_REV" || echo "$HEAD_REV")
    git clone -q . "$TMP/$side"
    git -C "$TMP/$side" checkout -q "$rev"
    (cd "$TMP/$side" && swift build -c release --product relaytrace >/dev/null && swift build -c release --product relaytrace-bench >/dev/null)
done
BIN_BASE="$TMP/base/.build/release/relaytrace"; BIN_HEAD="$TMP/head/.build/release/relaytrace"
# Simulated by BASE: a trace it wrote replays strictly on both sides (a later writer may record more).
"$BIN_BASE" simulate --scenario tour --duration 24h -o "$TMP/day.rtrace" --force >/dev/null
"$TMP/base/.build/release/relaytrace-bench" write "$TMP/stream.rtrace" --bytes "$BYTES" --seed 1 >/dev/null
records=$("$BIN_HEAD" info "$TMP/day.rtrace" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])')
echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); base $BASE_REV, after $HEAD_REV"
echo "tour: $records records; stream: $(stat -c %s "$TMP/stream.rtrace") bytes"
# The two binaries must agree before they are timed.
for bin in "$BIN_BASE" "$BIN_HEAD"; do "$bin" replay "$TMP/day.rtrace" >/dev/null || { echo "bench: $bin does not replay the tour" >&2; exit 1; }; done
differ=$(diff <("$BIN_BASE" frames "$TMP/stream.rtrace" --format jsonl) <("$BIN_HEAD" frames "$TMP/stream.rtrace" --format jsonl) | grep -c '^>' || true)
echo "frames listings: $differ lines differ between base and after"
declare -A best median times
run() {  # run KEY CMD...: keeps every wall time of KEY
    local t0 t1
    t0=$EPOCHREALTIME; "${@:2}" >/dev/null; t1=$EPOCHREALTIME
    times[$1]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }') "
}
for round in $(seq "$RUNS"); do  # all four once a round, in a shuffled order, so a change in load hits both sides alike
    for job in $(printf '%s\n' replay_base replay_head frames_base frames_head | shuf --random-source=<(yes "$round")); do
        bin=$BIN_BASE; [ "${job#*_}" = head ] && bin=$BIN_HEAD
        case $job in
            replay_*) run "$job" "$bin" replay "$TMP/day.rtrace" ;;
            frames_*) run "$job" "$bin" frames "$TMP/stream.rtrace" --format jsonl ;;
        esac
    done
done
for key in "${!times[@]}"; do  # the best and the median of each key's times
    read -r best[$key] median[$key] < <(tr ' ' '\n' <<<"${times[$key]}" | grep . | sort -n | awk '{ v[NR] = $1 } END { printf "%s %s\n", v[1], (NR % 2) ? v[(NR + 1) / 2] : sprintf("%.4f", (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
done
ir() { valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$@" >/dev/null 2>"$TMP/cg.err"; grep -o 'Collected : [0-9]*' "$TMP/cg.err" | grep -o '[0-9]*'; }
ir_base=$(ir "$BIN_BASE" replay "$TMP/day.rtrace"); ir_head=$(ir "$BIN_HEAD" replay "$TMP/day.rtrace")
# The frames listing's instructions, on a 20 MB stream (callgrind runs the workers one at a time; the total is what counts).
"$TMP/base/.build/release/relaytrace-bench" write "$TMP/small.rtrace" --bytes 20000000 --seed 1 >/dev/null
irf_base=$(ir "$BIN_BASE" frames "$TMP/small.rtrace" --format jsonl); irf_head=$(ir "$BIN_HEAD" frames "$TMP/small.rtrace" --format jsonl)
rate() { awk -v n="$records" -v s="$1" 'BEGIN { printf "%d", n / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b / a }'; }
printf "replay, best of %s:   base %s s (%s records/s)   after %s s (%s records/s)   after/base %s\n" "$RUNS" \
    "${best[replay_base]}" "$(rate "${best[replay_base]}")" "${best[replay_head]}" "$(rate "${best[replay_head]}")" "$(ratio "${best[replay_base]}" "${best[replay_head]}")"
printf "replay, median of %s:   base %s s   after %s s   after/base %s\n" "$RUNS" \
    "${median[replay_base]}" "${median[replay_head]}" "$(ratio "${median[replay_base]}" "${median[replay_head]}")"
printf "frames jsonl, best of %s:   base %s s   after %s s   after/base %s\n" "$RUNS" \
    "${best[frames_base]}" "${best[frames_head]}" "$(ratio "${best[frames_base]}" "${best[frames_head]}")"
printf "frames jsonl, median of %s:   base %s s   after %s s   after/base %s\n" "$RUNS" \
    "${median[frames_base]}" "${median[frames_head]}" "$(ratio "${median[frames_base]}" "${median[frames_head]}")"
printf "replay instructions (callgrind):   base %s   after %s   after/base %s\n" "$ir_base" "$ir_head" "$(ratio "$ir_base" "$ir_head")"
printf "frames instructions, 20 MB stream (callgrind):   base %s   after %s   after/base %s\n" "$irf_base" "$irf_head" "$(ratio "$irf_base" "$irf_head")"
