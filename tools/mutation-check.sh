#!/usr/bin/env bash
# Mutation check of the client's constants: in a scratch clone of HEAD, change each SPEC constant in
# Sources/Core/RelayClient/ClientConstants.swift, rebuild, and run the client's tests; every change must turn at
# least one test red ("killed"). Slow (one build per mutation); not part of the test command.
# Usage: tools/mutation-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/relaytrace-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT
git clone -q . "$work/repo"
cd "$work/repo"
F=Sources/Core/RelayClient/ClientConstants.swift
mutants=(
  's/handshakeTimeout: Duration = .seconds(10)/handshakeTimeout: Duration = .seconds(11)/'
  's/sendRetryStep: Duration = .milliseconds(250)/sendRetryStep: Duration = .milliseconds(300)/'
  's/sendRetryCap: Duration = .milliseconds(1500)/sendRetryCap: Duration = .milliseconds(2000)/'
  's/heartbeatInterval: Duration = .seconds(5)/heartbeatInterval: Duration = .seconds(6)/'
  's/watchdogTimeout: Duration = .seconds(15)/watchdogTimeout: Duration = .seconds(16)/'
  's/invalidResumeReRegisterDelay: Duration = .milliseconds(200)/invalidResumeReRegisterDelay: Duration = .milliseconds(300)/'
  's/invalidResumeLoopCount = 3/invalidResumeLoopCount = 4/'
  's/invalidResumeWindow: Duration = .seconds(30)/invalidResumeWindow: Duration = .seconds(31)/'
  's/relayProtocolVersion = "1.6"/relayProtocolVersion = "1.5"/'
  's/clientType = "mobile"/clientType = "desktop"/'
  's/closeCode: UInt16 = 1001/closeCode: UInt16 = 1000/'
  's/resumeKeySeparator = "::"/resumeKeySeparator = ":"/'
  's/recoveryWindow: Duration = .seconds(90)/recoveryWindow: Duration = .seconds(91)/'
  's/foregroundRecoveryDelay: Duration = .milliseconds(1500)/foregroundRecoveryDelay: Duration = .milliseconds(1600)/'
  's/interestRenewalInterval: Duration = .seconds(20)/interestRenewalInterval: Duration = .seconds(21)/'
  's/loginPollInterval: Duration = .seconds(2)/loginPollInterval: Duration = .seconds(3)/'
  's/loginPollLimit = 60/loginPollLimit = 61/'
  's/refreshLeadTime: Duration = .seconds(300)/refreshLeadTime: Duration = .seconds(301)/'
  's/refreshMinimumDelay: Duration = .seconds(5)/refreshMinimumDelay: Duration = .seconds(6)/'
)
killed=0; survived=0
for m in "${mutants[@]}"; do
  git checkout -q -- "$F"
  sed -i "$m" "$F"
  if git diff --quiet; then echo "NOT APPLIED: $m"; continue; fi
  if ! swift build --build-tests >/dev/null 2>&1; then echo "BUILD FAILED: $m"; continue; fi
  if swift test --skip-build --filter RelayClientTests >"$work/out.txt" 2>&1; then
    echo "SURVIVED: $m"; survived=$((survived + 1))
  else
    echo "killed ($(grep -c 'recorded an issue' "$work/out.txt") failed expectations): $m"; killed=$((killed + 1))
  fi
done
echo "killed $killed, survived $survived"
[ "$survived" = 0 ]
