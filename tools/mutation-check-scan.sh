#!/usr/bin/env bash
# Mutation check of the fast reading routes (issue 16): in a scratch clone of HEAD, break each fast route
# in one way (a sed on its source), rebuild, and run the differential tests that compare it with the plain
# route; every break must turn at least one of them red ("killed"). Slow (one build per mutation); not part
# of the test command. Usage: tools/mutation-check-scan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-scan-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT
git clone -q . "$work/repo"
cd "$work/repo"
TESTS='ScannerTests|ChunkSummaryTests|DeferredRecordTests|FrameListingTests'
# Each mutant: the file, a sed expression, and what the mutation breaks (three lines).
mutants=(
  'Sources/Analysis/Inspect/FrameFilter.swift'
  's/if let needle = grep, ByteSearch.isASCII(v.payload), /if let needle = grep, /'
  '--grep rejects non-ASCII payloads by their bytes'
  'Sources/Analysis/Inspect/FrameFilter.swift'
  's/                if plain, !FrameFilter.containsAnyString(types, in: v.payload) { return false }/                if !FrameFilter.containsAnyString(types, in: v.payload) { return false }/'
  '--type rejects escaped payloads by their bytes'
  'Sources/Analysis/Inspect/FrameFilter.swift'
  's/return !plainJSON(v.payload) || containsAnyString(requestOrResponseType, in: v.payload)/return containsAnyString(requestOrResponseType, in: v.payload) \&\& false/'
  'records stop reaching the correlator'
  'Sources/Analysis/Inspect/FrameFilter.swift'
  's/if !byKind \&\& !s.mayHaveMessageType(where: { types.contains($0) }) { return false }/if !byKind { return false }/'
  'chunks skipped by kind alone'
  'Sources/Analysis/Inspect/FrameListing.swift'
  's/if mayCorrelate \&\& RpcCorrelator.isRelevant(rec) {/if false {/'
  'RPC frames finished on the workers, uncorrelated'
  'Sources/Analysis/Inspect/InspectedRecord.swift'
  's/if let m = inner?.member(key) { return m.scalar?.stringValue }/if let m = inner?.member(key), m.scalar != nil { return m.scalar?.stringValue }/'
  'the deferred read falls back to the top level'
  'Sources/Core/RelayProtocol/JSONParser.swift'
  's/if let expanding, index < end, bytes\[index\] == ASCII.openBrace, key == expanding {/if let expanding, index < end, bytes[index] == ASCII.openBrace, key != expanding {/'
  'the shallow read expands the wrong members'
  'Sources/Core/Trace/TraceScanner.swift'
  's/let meets = table.indices.filter { table\[$0\].maxTime >= since/let meets = table.indices.filter { table[$0].minTime >= since/'
  'a window starts at the first chunk that starts in it'
  'Sources/Core/Trace/TraceScanner.swift'
  's/                        if mismatch {/                        if false \&\& mismatch {/'
  'a decoding scan stops checking summaries'
  'Sources/Core/Trace/TraceScanner.swift'
  's/        problems.append(e)$/        _ = e/'
  'salvage forgets the problems it skipped'
  'Sources/Core/Trace/TraceScanner.swift'
  's/if !meets {/if !meets || info.sequence == 3 {/'
  'a chunk in the window is dropped'
  'Sources/Core/Trace/ChunkSummary.swift'
  's/if ByteSearch.contains(k, in: UnsafeRawBufferPointer(rebasing: p\[(at + 6)...\])) { return nil }/_ = k/'
  'a second "type" no longer makes a frame untyped'
  'Sources/Analysis/Inspect/TraceStats.swift'
  's/        kind == .frameText || kind == .transportClosed || kind == .transportFailed$/        kind == .frameText || kind == .transportClosed/'
  'stats count failed sockets from their header alone'
  'Sources/Core/Trace/ByteSearch.swift'
  's/        while i <= limit {/        while i < limit {/'
  'the byte search misses a match at the very end'
)
killed=0; survived=0
for ((k = 0; k < ${#mutants[@]}; k += 3)); do
  file=${mutants[k]}; expr=${mutants[k + 1]}; what=${mutants[k + 2]}
  git checkout -q -- .
  sed -i "$expr" "$file" || { echo "BAD SED: $what"; continue; }
  if git diff --quiet; then echo "NOT APPLIED: $what"; continue; fi
  if ! swift build --build-tests >/dev/null 2>&1; then echo "BUILD FAILED: $what"; continue; fi
  if swift test --skip-build --filter "$TESTS" >"$work/out.txt" 2>&1; then
    echo "SURVIVED: $what"; survived=$((survived + 1))
  else
    echo "killed ($(grep -c 'recorded an issue' "$work/out.txt") failed expectations): $what"; killed=$((killed + 1))
  fi
done
echo "killed $killed, survived $survived"
[ "$survived" = 0 ]
