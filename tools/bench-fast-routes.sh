#!/usr/bin/env bash
# What each fast route is worth (docs/ARCHITECTURE.md, "The hot paths"; issue 19). In a scratch clone at
# REV (HEAD by default), builds `relaytrace` in release once as it is ("REV") and once per fast route with
# that route switched off (its guard made false, so every frame or record takes the reference route),
# plus once per set of routes in `sets` switched off together (routes too small to see one by one), plus
# once with every route off. Then, on one 24 h tour simulated by REV's binary, it times them all:
# strict `replay` of the tour (best of RUNS, records/s); strict `replay` of the same tour with every
# inbound frame respelled `type` first as PROTOCOL.md's examples are (`relaytrace-bench respell`: what a
# trace of a relay that does not write the development relay's exact bytes costs, since the canonical
# readers take none of its frames); `simulate` of the tour (capture shares the writers; best of
# SIM_RUNS); each round in a shuffled order so a change in load hits all alike. Then it counts each
# replay's instructions under callgrind (deterministic). A second copy of REV's binary runs as a control:
# its ratio to REV is the noise floor of the run. Prints, per route, how much slower the binary without it
# is than REV (without / REV), so a route that does not pay in wall time shows a ratio inside the noise.
# Slow the first time at a revision (one release build per route, 2-4 minutes each on 2 cores); the
# binaries are kept in .build/fast-routes/REV, so a second run at the same revision only times. Not part
# of the test command.
# Usage: tools/bench-fast-routes.sh [RUNS] [SIM_RUNS] [DURATION] [REV]     (defaults 61 9 24h HEAD)
#   SIM_RUNS 0 skips `simulate`; CALLGRIND=0 skips the instruction counts; ONLY="0 2 set0" times only
#   those binaries (route numbers from 0, sets as setK, none) beside REV and its control, for a closer
#   look at small differences with more rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-61}"; SIM_RUNS="${2:-9}"; DURATION="${3:-24h}"; REV=$(git rev-parse --short "${4:-HEAD}")
[ -n "${EPOCHREALTIME:-}" ] || { echo "bench: needs bash 5 (EPOCHREALTIME)" >&2; exit 1; }
command -v valgrind >/dev/null || { SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo; DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq valgrind >/dev/null; }
TMP="$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-fast-routes.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
BIN="$PWD/.build/fast-routes/$REV"
mkdir -p "$BIN"
# name | file | the guard | the guard switched off (python str.replace, first occurrence; all must apply)
routes=(
  'pong literal|Sources/Core/RelayProtocol/RelayMessage.swift|        if text.utf8.count == pong.utf8CodeUnitCount|        if false, text.utf8.count == pong.utf8CodeUnitCount'
  'canonical event|Sources/Core/RelayProtocol/RelayMessage.swift|        if let fields = RelayFrameReader.readingCanonicalEvent(text) {|        if false, let fields = RelayFrameReader.readingCanonicalEvent(text) {'
  'canonical rpc.response|Sources/Core/RelayProtocol/RelayMessage.swift|        if let f = RelayFrameReader.readingCanonicalRpcResponse(text),|        if false, let f = RelayFrameReader.readingCanonicalRpcResponse(text),'
  'deferred event payload|Sources/Core/RelayProtocol/RelayMessage.swift|        if let fast = try? RelayFrameReader.parsingDeferringEventPayload(text),|        if false, let fast = try? RelayFrameReader.parsingDeferringEventPayload(text),'
  'TimelineUpdated(raw:) direct read|Sources/Core/RelayProtocol/Events.swift|        if case .string(let s)? = m.last(named: "sessionId")?.built,|        if false, case .string(let s)? = m.last(named: "sessionId")?.built,'
  'heartbeat writer|Sources/Core/RelayProtocol/RelayMessage.swift|        case .heartbeat(let p) where p.activeSessionId == nil:|        case .heartbeat(let p) where false \&\& p.activeSessionId == nil:'
  'rpc.request writer|Sources/Core/RelayProtocol/RelayMessage.swift|        case .rpcRequest(let r) where !CamelCaseGuard|        case .rpcRequest(let r) where false \&\& !CamelCaseGuard'
  'client event writer|Sources/Core/RelayProtocol/RelayMessage.swift|        case .event(let e) where !e.isRelayForm|        case .event(let e) where false \&\& !e.isRelayForm'
  'input reader|Sources/Recording/Capture/ClientRecordCodec.swift|, let input = InputFastPath.decode(record.payload, kind: record.kind) {|, false, let input = InputFastPath.decode(record.payload, kind: record.kind) {'
  'action writer|Sources/Recording/Capture/ClientRecordCodec.swift|        guard let bytes = directActionBytes(action) else {|        guard false, let bytes = directActionBytes(action) else {'
)
# Sets of routes switched off together: name | the routes' numbers in the list above (from 0).
sets=(
  'the four smallest: pong literal, canonical rpc.response, rpc.request and client event writers|0 2 6 7'
)
edit() {  # edit FILE FROM TO: replace the first occurrence, or fail
  python3 - "$@" <<'PY'
import sys
path, a, b = sys.argv[1], *(s.replace('\\n', '\n').replace('\\&', '&') for s in sys.argv[2:4])
s = open(path).read()
if a not in s: sys.exit(f"bench: the guard is not in {path}: {a!r}")
open(path, 'w').write(s.replace(a, b, 1))
PY
}
clone() { [ -d "$TMP/repo" ] || { git clone -q . "$TMP/repo" && git -C "$TMP/repo" checkout -q "$REV"; }; }
build() {  # build SLUG: a release relaytrace of the clone as it is now, kept as $BIN/SLUG
  clone
  (cd "$TMP/repo" && swift build -c release --product relaytrace >"$TMP/build.txt" 2>&1) || { tail -20 "$TMP/build.txt"; exit 1; }
  cp "$TMP/repo/.build/release/relaytrace" "$BIN/$1.part" && mv "$BIN/$1.part" "$BIN/$1"
}
built() { [ -x "$BIN/$1" ] && echo "kept: $1 ($BIN)"; }
split() { IFS='|' read -r name file from to <<<"$1"; }
built head || { echo "building HEAD ($REV)..."; build head; }
cp "$BIN/head" "$BIN/control"
slugs=(); names=()
for i in "${!routes[@]}"; do
  split "${routes[$i]}"
  if ! built "r$i"; then
    echo "building without: $name"
    clone
    (cd "$TMP/repo" && edit "$file" "$from" "$to")
    build "r$i"
    git -C "$TMP/repo" checkout -q -- Sources
  fi
  slugs+=("r$i"); names+=("$name")
done
for k in "${!sets[@]}"; do
  IFS='|' read -r setname members <<<"${sets[$k]}"
  if ! built "set$k"; then
    echo "building without: $setname"
    clone
    for i in $members; do split "${routes[$i]}"; (cd "$TMP/repo" && edit "$file" "$from" "$to"); done
    build "set$k"
    git -C "$TMP/repo" checkout -q -- Sources
  fi
  slugs+=("set$k"); names+=("$setname")
done
if ! built none; then
  echo "building without any fast route"
  clone
  for r in "${routes[@]}"; do split "$r"; (cd "$TMP/repo" && edit "$file" "$from" "$to"); done
  build none
  git -C "$TMP/repo" checkout -q -- Sources
fi
if [ ! -x "$BIN/relaytrace-bench" ]; then
  clone
  (cd "$TMP/repo" && swift build -c release --product relaytrace-bench >"$TMP/build.txt" 2>&1) || { tail -20 "$TMP/build.txt"; exit 1; }
  cp "$TMP/repo/.build/release/relaytrace-bench" "$BIN/relaytrace-bench"
fi
slugs+=(none); names+=("every fast route")
if [ -n "${ONLY:-}" ]; then
  keep_slugs=(); keep_names=()
  for i in "${!slugs[@]}"; do
    for w in $ONLY; do
      case "$w" in set*|none) want=$w ;; *) want=r$w ;; esac
      [ "${slugs[$i]}" = "$want" ] && { keep_slugs+=("${slugs[$i]}"); keep_names+=("${names[$i]}"); }
    done
  done
  slugs=("${keep_slugs[@]}"); names=("${keep_names[@]}")
fi

"$BIN/head" simulate --scenario tour --duration "$DURATION" -o "$TMP/day.rtrace" --force >/dev/null
"$BIN/relaytrace-bench" respell "$TMP/day.rtrace" "$TMP/respelled.rtrace" >/dev/null
records=$("$BIN/head" info "$TMP/day.rtrace" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])')
for s in head control "${slugs[@]}"; do  # every binary must replay the tour strictly before it is timed
  "$BIN/$s" replay "$TMP/day.rtrace" >/dev/null || { echo "bench: $s does not replay the tour strictly" >&2; exit 1; }
  "$BIN/$s" replay "$TMP/respelled.rtrace" >/dev/null || { echo "bench: $s does not replay the respelled tour strictly" >&2; exit 1; }
done
declare -A best
run() {  # run KEY CMD...: keeps the best wall time of KEY
  local t0 t1
  t0=$EPOCHREALTIME; "${@:2}" >/dev/null; t1=$EPOCHREALTIME
  best[$1]=$(awk -v a="$t0" -v b="$t1" -v m="${best[$1]:-1e9}" 'BEGIN { s = b - a; printf "%.4f", (s < m) ? s : m }')
}
echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); REV $REV; tour $DURATION: $records records"
for round in $(seq "$RUNS"); do  # every binary once a round, in a shuffled order, so a change in load hits all alike
  for s in $(printf '%s\n' head control "${slugs[@]}" | shuf --random-source=<(yes "$round")); do
    run "replay_$s" "$BIN/$s" replay "$TMP/day.rtrace"
    run "respelled_$s" "$BIN/$s" replay "$TMP/respelled.rtrace"
  done
done
for round in $(seq "$SIM_RUNS"); do
  for s in $(printf '%s\n' head control "${slugs[@]}" | shuf --random-source=<(yes "$round")); do
    run "sim_$s" "$BIN/$s" simulate --scenario tour --duration "$DURATION" -o "$TMP/sim.rtrace" --force
  done
done
declare -A ir
[ "${CALLGRIND:-1}" = 0 ] || {
count() { valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$@" >/dev/null 2>"$TMP/cg.err"; grep -o 'Collected : [0-9]*' "$TMP/cg.err" | grep -o '[0-9]*'; }
for s in head "${slugs[@]}"; do
  ir[$s]=$(count "$BIN/$s" replay "$TMP/day.rtrace")
  ir[r_$s]=$(count "$BIN/$s" replay "$TMP/respelled.rtrace")
done
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b / a }'; }
rate() { awk -v n="$records" -v s="$1" 'BEGIN { printf "%d", n / s }'; }
row() {  # row LABEL SLUG: the binary's figures, each as a ratio to REV's
  local s=$2 irt="-" irr="-" sim="-" simx="-"
  [ -n "${ir[$s]:-}" ] && irt=$(ratio "${ir[head]}" "${ir[$s]}") && irr=$(ratio "${ir[r_head]}" "${ir[r_$s]}")
  [ -n "${best[sim_$s]:-}" ] && sim=${best[sim_$s]} && simx=$(ratio "${best[sim_head]}" "${best[sim_$s]}")
  printf "| %s | %s (%s/s) | %s | %s | %s | %s | %s | %s |\n" "$1" "${best[replay_$s]}" "$(rate "${best[replay_$s]}")" \
    "$(ratio "${best[replay_head]}" "${best[replay_$s]}")" "$irt" \
    "$(ratio "${best[respelled_head]}" "${best[respelled_$s]}")" "$irr" "$sim" "$simx"
}
echo "| binary | replay of the tour, s | x $REV | Ir x $REV | replay respelled, x $REV | Ir x $REV | simulate, s | x $REV |"
echo "|---|---|---|---|---|---|---|---|"
row "$REV (every fast route)" head
row "control ($REV again: the noise)" control
for i in "${!slugs[@]}"; do row "without: ${names[$i]}" "${slugs[$i]}"; done
echo "$REV: replay of the tour ${best[replay_head]} s, ${ir[head]:--} Ir; respelled ${best[respelled_head]} s, ${ir[r_head]:--} Ir; $RUNS rounds"
