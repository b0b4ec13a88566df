#!/usr/bin/env bash
# The whole test suite under ThreadSanitizer and AddressSanitizer (docs/BENCHMARKS.md, "Sanitizers").
#
#   tools/sanitize.sh [thread|address|all] [swift test options, e.g. --filter NetTests]
#
# Each sanitizer builds into its own build path (.build/sanitize-thread, .build/sanitize-address), so
# the normal .build is left alone; the relaytrace binary the CLI tests run is instrumented too. Reports
# are not fatal (halt_on_error=0), so one run finds them all: the log of each run is
# .build/sanitize-NAME.log, and the last lines printed count the reports and the tests. The exit status
# is 0 only when every test passed and neither sanitizer reported anything.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
[ $# -gt 0 ] && shift
case "$which" in
    all) sanitizers=(thread address) ;;
    thread|address) sanitizers=("$which") ;;
    *) echo "usage: tools/sanitize.sh [thread|address|all] [swift test options]" >&2; exit 64 ;;
esac
./tools/setup.sh
./tools/interop/setup-venv.sh
./tools/setup-duckdb.sh >/dev/null 2>&1 || true

export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 history_size=4 suppressions=$PWD/tools/tsan.supp ${TSAN_OPTIONS:-}"
# The sanitizers' runtimes map their shadow memory around a position-independent executable: relaytrace is
# linked the toolchain's default way here (Package.swift, RELAYTRACE_DYNAMIC_LINK), not static and
# position-dependent (under TSan that binary fails at its first large allocation).
export RELAYTRACE_DYNAMIC_LINK=1
# Leak checking stays on: a leak in our code is a finding too.
export ASAN_OPTIONS="halt_on_error=0 detect_leaks=1 ${ASAN_OPTIONS:-}"
# Globals initialised once and kept to the end are not leaks (tools/lsan.supp says which).
export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp print_suppressions=0 ${LSAN_OPTIONS:-}"
status=0
for s in "${sanitizers[@]}"; do
    path=.build/sanitize-$s
    log=.build/sanitize-$s.log
    # Under ThreadSanitizer `Locked` (Sources/Core/Sync) annotates its lock: the standard library's Mutex is
    # invisible to it on Linux, and every access it protects would be reported.
    flags=(-Xswiftc -warnings-as-errors)
    [ "$s" = thread ] && flags+=(-Xswiftc -DRELAYTRACE_TSAN)
    echo "sanitize: building the tests with --sanitize=$s into $path" >&2
    swift build --build-tests --build-path "$path" --sanitize="$s" "${flags[@]}" 2>&1 \
        | grep -v "Cannot export local symbol" | tail -3 >&2
    echo "sanitize: running the tests under $s (log $log)" >&2
    set +e
    RELAYTRACE_SANITIZER=$s swift test --skip-build --build-path "$path" --sanitize="$s" "${flags[@]}" --parallel "$@" >"$log" 2>&1
    tests=$?
    set -e
    case "$s" in
        thread) reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true) ;;
        address) reports=$(grep -c -E "ERROR: (AddressSanitizer|LeakSanitizer)" "$log" || true) ;;
    esac
    summary=$(grep -E "Test run with|Executed [0-9]+ tests" "$log" | tail -2 | tr '\n' ' ')
    echo "$s: $reports report(s); tests exit $tests; $summary"
    if [ "$tests" -ne 0 ] || [ "$reports" -ne 0 ]; then status=1; fi
done
exit $status
