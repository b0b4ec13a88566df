#!/usr/bin/env bash
# Trace benchmark (issue 4): writer throughput, size against `zstd -3` on the same raw record stream,
# reader scan speed against `zstd -dc FILE > /dev/null` on the same trace, reader peak memory.
# Figures go to docs/BENCHMARKS.md. Usage: tools/bench-trace.sh [BYTES]   (default 1.1e9 raw bytes)
set -euo pipefail
cd "$(dirname "$0")/.."

BYTES="${1:-1100000000}"
if [ ! -x /usr/bin/time ]; then
    echo "bench: installing GNU time" >&2
    SUDO=""; if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq time >/dev/null
fi
command -v zstd >/dev/null || { echo "bench: zstd is missing (tools/setup.sh installs it)" >&2; exit 1; }

swift build -c release --product relaytrace-bench >/dev/null
BIN="$(swift build -c release --show-bin-path)/relaytrace-bench"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-bench.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
TRACE="$TMP/trace.rtrace"

get() { grep "^$1 " "$2" | awk '{print $2}'; }

echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
echo "== write ($BYTES bytes of records)"
"$BIN" write "$TRACE" --bytes "$BYTES" --seed 1 | tee "$TMP/write.txt"

echo "== raw record stream (zstd -dc of the trace) and zstd -3 of it"
zstd -q -dc "$TRACE" > "$TMP/raw.bin"
RAW=$(stat -c %s "$TMP/raw.bin")
/usr/bin/time -f "%e %U %S" -o "$TMP/z3.txt" sh -c "zstd -q -3 -c '$TMP/raw.bin' > '$TMP/raw.zst'"
read -r Z3_S Z3_U Z3_SYS < "$TMP/z3.txt"
Z3=$(stat -c %s "$TMP/raw.zst")
rm -f "$TMP/raw.bin"
TRACE_BYTES=$(stat -c %s "$TRACE")

echo "== scan: relaytrace reader vs zstd -dc > /dev/null (same file; each run twice, best kept)"
best() { awk 'BEGIN{m=1e9} {if ($1<m) m=$1} END{print m}'; }
for i in 1 2; do
    /usr/bin/time -f "%e %M" -o "$TMP/time.txt" "$BIN" scan "$TRACE" > "$TMP/scan.txt"
    awk '{print $1}' "$TMP/time.txt" >> "$TMP/scan.secs"; awk '{print $2}' "$TMP/time.txt" >> "$TMP/scan.rss"
    /usr/bin/time -f "%e %M" -o "$TMP/time.txt" sh -c "zstd -q -dc '$TRACE' > /dev/null"
    awk '{print $1}' "$TMP/time.txt" >> "$TMP/zstd.secs"
done
SCAN_S=$(best < "$TMP/scan.secs"); ZSTD_S=$(best < "$TMP/zstd.secs")
RSS_KB=$(sort -n "$TMP/scan.rss" | tail -1)

cat "$TMP/scan.txt"
awk -v raw="$RAW" -v z3="$Z3" -v tb="$TRACE_BYTES" -v z3s="$Z3_S" -v z3cpu="$(awk -v u="$Z3_U" -v s="$Z3_SYS" 'BEGIN{print u+s}')" \
    -v ss="$SCAN_S" -v zs="$ZSTD_S" -v rss="$RSS_KB" 'BEGIN {
    printf "raw record stream      %d bytes\n", raw
    printf "trace file             %d bytes (ratio %.2f)\n", tb, raw / tb
    printf "zstd -3 of raw stream  %d bytes (%.1f s = %.0f MB/s; %.0f MB per CPU-second)\n", z3, z3s, raw / z3s / 1e6, raw / z3cpu / 1e6
    printf "trace / zstd -3        %.3f   (target <= 1.10)\n", tb / z3
    printf "reader scan            %.2f s = %.0f MB/s of records\n", ss, raw / ss / 1e6
    printf "zstd -dc > /dev/null   %.2f s = %.0f MB/s\n", zs, raw / zs / 1e6
    printf "scan speed / zstd -dc  %.2f   (target >= 0.50)\n", zs / ss
    printf "reader peak RSS        %.1f MiB (target < 64)\n", rss / 1024
}'
