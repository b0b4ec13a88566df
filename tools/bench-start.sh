#!/usr/bin/env bash
# Process start (docs/BENCHMARKS.md, "Process start"): the statically linked, position-dependent
# `relaytrace` (the default build, Package.swift) against the same sources linked the toolchain's default
# way (shared Swift runtime and Foundation, PIE), built into .build/dynamic-link with
# RELAYTRACE_DYNAMIC_LINK=1, in the same run. Each command runs RUNS times; the median and the minimum
# wall time count (the nanosecond clock around the run, so it includes fork and exec).
# Usage: tools/bench-start.sh [RUNS]   (default 101)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-101}"
swift build -c release --product relaytrace >/dev/null
RELAYTRACE_DYNAMIC_LINK=1 swift build -c release --product relaytrace --build-path .build/dynamic-link >/dev/null
STATIC="$(swift build -c release --show-bin-path)/relaytrace"
DYNAMIC="$(RELAYTRACE_DYNAMIC_LINK=1 swift build -c release --build-path .build/dynamic-link --show-bin-path)/relaytrace"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-bench-start.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
"$STATIC" simulate --scenario tour --duration 1h --output "$TMP/tour.rtrace" >/dev/null
MID=$("$STATIC" info "$TMP/tour.rtrace" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"] // 2)')

# median and minimum milliseconds of RUNS runs of "$@"
timeit() {
    for _ in $(seq "$RUNS"); do
        local t0 t1
        t0=$(date +%s%N)
        "$@" >/dev/null 2>&1
        t1=$(date +%s%N)
        echo $(( t1 - t0 ))
    done | sort -n | awk '{ a[NR] = $1 } END { printf "%.2f %.2f\n", a[int((NR + 1) / 2)] / 1e6, a[1] / 1e6 }'
}
echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run; $RUNS runs each"
echo "static:  $(stat -c %s "$STATIC") bytes, $(ldd "$STATIC" | wc -l) shared objects"
echo "dynamic: $(stat -c %s "$DYNAMIC") bytes, $(ldd "$DYNAMIC" | wc -l) shared objects"
printf '%-34s %20s %20s %8s\n' "command" "dynamic median/min" "static median/min" "ratio"
for cmd in "--version" "show $TMP/tour.rtrace $MID" "info $TMP/tour.rtrace"; do
    # shellcheck disable=SC2086
    read -r dm dn < <(timeit "$DYNAMIC" $cmd)
    # shellcheck disable=SC2086
    read -r sm sn < <(timeit "$STATIC" $cmd)
    label="${cmd//$TMP\//}"
    printf '%-34s %11s / %5s ms %11s / %5s ms %7.2fx\n' "$label" "$dm" "$dn" "$sm" "$sn" "$(awk -v a="$dm" -v b="$sm" 'BEGIN { print a / b }')"
done
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
