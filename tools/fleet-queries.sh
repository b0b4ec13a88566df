#!/usr/bin/env bash
# Fleets of traces (issue 21): writes N simulated traces with a `simulate` loop (every relay scenario
# in turn, seed = its number + 1; some with an invalidResume loop or a background pause added by a fault
# script), exports them with ONE `relaytrace export --format jsonl` (peak RSS by /usr/bin/time -v,
# also for the first 10 traces alone: constant memory), then runs the three queries of
# tools/fleet_queries.py in DuckDB and in Spark local mode and checks that they agree, that exactly
# the traces given a loop have one, and that every trace given a pause has a heartbeat gap.
# Figures go to docs/BENCHMARKS.md ("Fleets of traces").
# Usage: tools/fleet-queries.sh [N] [ENGINES]   (default 1000 traces, both engines; ENGINES: duckdb|spark|both)
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-1000}"
ENGINES="${2:-both}"
if [ ! -x /usr/bin/time ]; then
    echo "fleet: installing GNU time" >&2
    SUDO=""; if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq time >/dev/null
fi
./tools/setup-duckdb.sh
if [ "$ENGINES" != duckdb ]; then
    command -v java >/dev/null || { echo "fleet: Spark needs Java (17): apt-get install openjdk-17-jre-headless" >&2; exit 1; }
    if ! .venv/bin/python -c "import pyspark" 2>/dev/null; then
        echo "fleet: installing pyspark into .venv" >&2
        .venv/bin/python -m pip install --quiet --disable-pip-version-check pyspark
    fi
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-fleet.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
swift build -c release --product relaytrace > "$TMP/build.log" 2>&1 || { cat "$TMP/build.log" >&2; exit 1; }
RT="$(swift build -c release --show-bin-path)/relaytrace"
mkdir "$TMP/traces" "$TMP/ten"
printf 'on register relay invalid-resume count=3\n' > "$TMP/loop.faults"

SCENARIOS=(tour handshake-timeout watchdog invalid-resume invalid-resume-loop rpc-timeout rpc-timeout-replaced
           handover background lease ingress-coalesce token-refresh offline-queue link)
# Scenarios long enough for a pause after the first heartbeat and a heartbeat after it.
LONG=" tour rpc-timeout-replaced handover background lease token-refresh "

echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
echo "== simulate $N traces"
start=$(date +%s%N)
: > "$TMP/expected-loops"
: > "$TMP/expected-gaps"
for ((i = 0; i < N; i++)); do
    s="${SCENARIOS[i % ${#SCENARIOS[@]}]}"
    name="$(printf '%04d' "$i")-$s"
    faults=()
    if [ "$s" = invalid-resume-loop ]; then
        echo "$TMP/traces/$name.rtrace" >> "$TMP/expected-loops"
    elif [ $((i % 10)) = 7 ] && [ "$s" != link ] && [ "$s" != offline-queue ]; then
        name="$name+loop"
        faults=(--faults "$TMP/loop.faults")
        echo "$TMP/traces/$name.rtrace" >> "$TMP/expected-loops"
    elif [ $((i % 5)) = 1 ] && [[ "$LONG" == *" $s "* ]]; then
        # Into the background after the first heartbeat (6-15 s), back 2 s later.
        b=$((6 + i % 10))
        name="$name+pause"
        printf 'at %ss client app background\nat %ss client app foreground\n' "$b" $((b + 2)) > "$TMP/$name.faults"
        faults=(--faults "$TMP/$name.faults")
        echo "$TMP/traces/$name.rtrace" >> "$TMP/expected-gaps"
    fi
    "$RT" simulate --scenario "$s" --seed $((i + 1)) ${faults[@]+"${faults[@]}"} -o "$TMP/traces/$name.rtrace" >/dev/null
done
sim=$((($(date +%s%N) - start) / 1000000))
echo "simulated $N traces in ${sim} ms: $(du -sh "$TMP/traces" | cut -f1), $(wc -l < "$TMP/expected-loops") with a loop, $(wc -l < "$TMP/expected-gaps") with a pause"

rss() { grep "Maximum resident set size" "$1" | awk '{print $6}'; }
wall() { grep "Elapsed (wall clock)" "$1" | awk '{print $8}'; }

echo "== export: the first 10 traces, then all $N, each with one command"
for f in $(ls "$TMP/traces" | head -10); do ln -s "$TMP/traces/$f" "$TMP/ten/$f"; done
/usr/bin/time -v -o "$TMP/time10.txt" "$RT" export --format jsonl -o "$TMP/ten.jsonl" "$TMP/ten"
/usr/bin/time -v -o "$TMP/timeN.txt" "$RT" export --format jsonl -o "$TMP/fleet.jsonl" "$TMP/traces"
echo "export of 10 traces: peak RSS $(rss "$TMP/time10.txt") KiB, $(wall "$TMP/time10.txt") wall"
echo "export of $N traces: peak RSS $(rss "$TMP/timeN.txt") KiB, $(wall "$TMP/timeN.txt") wall, $(wc -l < "$TMP/fleet.jsonl") rows, $(du -h "$TMP/fleet.jsonl" | cut -f1)"

echo "== the three queries ($ENGINES)"
status=0
.venv/bin/python tools/fleet_queries.py "$TMP/fleet.jsonl" --engine "$ENGINES" --out "$TMP/results.json" \
    --expect-loops "$TMP/expected-loops" --expect-gaps "$TMP/expected-gaps" > /dev/null 2> "$TMP/queries.err" || status=$?
# Spark's start-up chatter (log4j, hostname warnings) stays in the file unless the queries failed.
if [ "$status" != 0 ]; then cat "$TMP/queries.err" >&2; fi
.venv/bin/python - "$TMP/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for engine in ("duckdb", "spark"):
    if engine not in r:
        continue
    e = r[engine]
    extra = f" (+ {e['sessionSeconds']} s to start the session)" if "sessionSeconds" in e else ""
    res = e["results"]
    print(f"{engine}: {e['rows']} rows of {e['traces']} traces; load + 3 queries {e['seconds']} s{extra}; "
          f"{len(res['rpc'])} methods, {len(res['loops'])} traces with a loop, {len(res['gaps'])} heartbeat gaps")
if "agree" in r:
    print("DuckDB and Spark agree" if r["agree"] else "DuckDB and Spark DISAGREE")
rpc = (r.get("duckdb") or r["spark"])["results"]["rpc"]
print("method, responses, p50 ms, p99 ms:")
for row in rpc:
    print("  " + ", ".join(str(v) for v in row))
PY
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"
exit "$status"
