#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (docs/BENCHMARKS.md, "Fuzzing").
#
#   tools/fuzz.sh TARGET [SECONDS] [libFuzzer options...]   fuzz TARGET for SECONDS (default 60)
#   tools/fuzz.sh list                                       the targets
#   tools/fuzz.sh all [SECONDS]                              every target in turn, SECONDS each
#
# Builds Sources/Apps/relaytrace-fuzz (and everything it calls) in release mode with SanitizerCoverage
# (inline 8-bit counters, PC table, comparison tracing) and AddressSanitizer into .build/fuzz, linked
# with libFuzzer's no-main runtime from the Swift toolchain; the driver hands TARGET's body to
# LLVMFuzzerRunDriver. The corpus grows in .build/fuzz/corpus/TARGET (seeded from fuzz/corpus/TARGET,
# which stays small and is what the test suite replays); crashes land in .build/fuzz/crashes/TARGET.
# The Swift backtracer is off (SWIFT_BACKTRACE): libFuzzer and ASan report the crash and keep the input.
# The last line printed is the figures for BENCHMARKS.md: executions, exec/s, coverage, corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: tools/fuzz.sh TARGET [SECONDS] [libFuzzer options...] (tools/fuzz.sh list)}
seconds=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))

toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v swiftc)")")")
runtime=$(ls "$toolchain"/lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a 2>/dev/null | head -1)
[ -n "$runtime" ] || { echo "fuzz: libclang_rt.fuzzer_no_main not found under $toolchain/lib/clang" >&2; exit 69; }

# The linker warns about ASan's local symbols (ld.gold); the build itself must succeed.
swift build -c release --build-path .build/fuzz --product relaytrace-fuzz \
    -Xswiftc -sanitize=address \
    -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp,indirect-calls \
    -Xswiftc -DRELAYTRACE_FUZZ \
    -Xlinker "$runtime" -Xlinker -lstdc++ 2>&1 | grep -v "Cannot export local symbol" | grep -v "^$" >&2 || true
driver=.build/fuzz/release/relaytrace-fuzz
[ -x "$driver" ] || { echo "fuzz: the driver did not build" >&2; exit 70; }

if [ "$target" = list ]; then
    "$driver" 2>&1 | tail -n +3
    exit 0
fi
if [ "$target" = all ]; then
    failed=0
    for t in $("$driver" 2>&1 | tail -n +3 | awk '{print $1}'); do
        "$0" "$t" "$seconds" "$@" || failed=1
    done
    exit $failed
fi

seeds=fuzz/corpus/$target
[ -d "$seeds" ] || { echo "fuzz: no seed corpus $seeds (tools/fuzz.sh list)" >&2; exit 66; }
corpus=.build/fuzz/corpus/$target
crashes=.build/fuzz/crashes/$target
mkdir -p "$corpus" "$crashes"
log=.build/fuzz/$target.log

# -max_len 4096: the seeds are smaller and every format's structure fits; -rss_limit_mb bounds memory
# (the reader refuses chunks over 1 MiB in these targets); -timeout flags a slow input as a hang.
export SWIFT_BACKTRACE=enable=no
set +e
"$driver" "$target" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=1536 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$@" "$corpus" "$seeds" >"$log" 2>&1
status=$?
set -e
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
units=$(ls "$corpus" | wc -l)
if [ $status -ne 0 ]; then
    echo "fuzz: $target stopped with status $status; the log is $log, the input in $crashes:" >&2
    grep -E "ERROR|Fatal error|Precondition failed|SUMMARY|Test unit written" "$log" | head -20 >&2
    exit 1
fi
echo "$target: ${runs:-?} executions in ${seconds} s, ${speed:-?} exec/s, coverage ${cov:-?} edges, ${ft:-?} features, corpus $units inputs (log $log)"
