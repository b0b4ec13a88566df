#!/usr/bin/env bash
# Load on `relaytrace relay` (issue 20), this tree against a baseline relay, in the same run:
#   (a) CLIENTS python websockets phones for DURATION s: register, heartbeat every 5 s, one system.ping RPC
#       per second each; RPCs sent / answered / refused / lost, latency p50/p90/p99, relay CPU and RSS;
#   (b) IDLE registered connections held HOLD s: the relay's RSS and threads.
# The baseline is the thread-per-connection relay of BASELINE (default 088b145, main before the event
# loop), built once from `git archive` into .build/baseline/REV (BASELINE=none skips it). Loopback only;
# every relay runs with --for, so nothing outlives the script; fd limits are raised to the hard limit.
#
#   tools/bench-relay-load.sh                         # 1,000 x 60 s and 10,000 idle, both relays
#   CLIENTS=200 DURATION=10 IDLE=2000 tools/bench-relay-load.sh   # a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-1000}
DURATION=${DURATION:-60}
IDLE=${IDLE:-10000}
HOLD=${HOLD:-10}
BASELINE=${BASELINE:-088b145}
OUT=${OUT:-.build/bench-relay-load}

./tools/interop/setup-venv.sh
PY=.venv/bin/python
ulimit -n "$(ulimit -Hn)"
mkdir -p "$OUT"

swift build -c release --product relaytrace >&2
CURRENT=.build/release/relaytrace
RELAYS=("current:$CURRENT")
if [ "$BASELINE" != none ]; then
    BASE_DIR=.build/baseline/$BASELINE
    if [ ! -x "$BASE_DIR/.build/release/relaytrace" ]; then
        echo "bench-relay-load: building the baseline relay at $BASELINE in $BASE_DIR (once)" >&2
        rm -rf "$BASE_DIR" && mkdir -p "$BASE_DIR"
        git archive "$BASELINE" | tar -x -C "$BASE_DIR"
        (cd "$BASE_DIR" && swift build -c release --product relaytrace >&2)
    fi
    RELAYS+=("baseline-$BASELINE:$BASE_DIR/.build/release/relaytrace")
fi

# run LABEL BINARY MODE ARGS...: starts the relay, runs the load tool against it, stops the relay.
run() {
    local label=$1 binary=$2 mode=$3
    shift 3
    local log="$OUT/$label-$mode.log"
    "$binary" relay --listen 127.0.0.1:0 --for 900s > "$log" 2>&1 &
    local pid=$!
    local url=""
    for _ in $(seq 1 100); do
        url=$(head -1 "$log" 2>/dev/null | sed -n 's/^listening on //p')
        [ -n "$url" ] && break
        sleep 0.1
    done
    if [ -z "$url" ]; then
        echo "bench-relay-load: $label relay did not start: $(cat "$log")" >&2
        kill "$pid" 2>/dev/null || true
        return 1
    fi
    local load
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    local report
    report=$("$PY" tools/interop/relay_load.py "$mode" "$url" --relay-pid "$pid" "$@" || true)
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "{\"relay\":\"$label\",\"loadAverageBefore\":\"$load\",\"report\":${report:-null}}" | tee -a "$OUT/results.jsonl"
}

: > "$OUT/results.jsonl"
echo "bench-relay-load: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for entry in "${RELAYS[@]}"; do
    run "${entry%%:*}" "${entry#*:}" rpc --clients "$CLIENTS" --duration "$DURATION"
done
for entry in "${RELAYS[@]}"; do
    run "${entry%%:*}" "${entry#*:}" idle --clients "$IDLE" --hold "$HOLD"
done

# A table of the figures.
"$PY" - "$OUT/results.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print()
print("| relay | mode | clients | registered | RPCs sent | answered | refused | lost | p50 ms | p99 ms | relay CPU s | relay RSS MiB | peak RSS MiB | threads | load avg |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    rep = r["report"] or {}
    end = rep.get("relayAtEnd") or {}
    reg = rep.get("relayAtRegistered") or {}
    cpu = None
    if "cpuSeconds" in end and "cpuSeconds" in reg:
        cpu = round(end["cpuSeconds"] - reg["cpuSeconds"], 2)
    lat = rep.get("latencyMs") or {}
    rss = end.get("VmRSSKiB") or reg.get("VmRSSKiB")
    peak = end.get("VmHWMKiB") or reg.get("VmHWMKiB")
    print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
        r["relay"], rep.get("mode", "?"), rep.get("clients", "?"), rep.get("registered", "?"),
        rep.get("rpcSent", "-"), rep.get("rpcAnswered", "-"), rep.get("rpcRefused", "-"), rep.get("rpcLost", "-"),
        lat.get("p50", "-"), lat.get("p99", "-"), cpu if cpu is not None else "-",
        round(rss / 1024, 1) if rss else "-", round(peak / 1024, 1) if peak else "-",
        max(end.get("threads", 0), reg.get("threads", 0)) or "-", r["loadAverageBefore"]))
EOF
