#!/usr/bin/env bash
# The test command (README.md): set-up, a warning-free build, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
# The python venv (.venv) with websockets for the interop tests (quiet when present).
./tools/interop/setup-venv.sh
# DuckDB in .venv for the JSONL export check (skipped when it cannot be installed).
./tools/setup-duckdb.sh || echo "test: duckdb unavailable; its check will be skipped" >&2
# Chromium, chromium-driver and selenium for the viewer's browser tests (skipped when they cannot be installed).
./tools/setup-browser.sh || echo "test: Chromium or selenium unavailable; the viewer's browser tests will be skipped" >&2
# Zero warnings is a house rule: the build fails on any warning.
swift build --build-tests -Xswiftc -warnings-as-errors
swift test --skip-build --parallel -Xswiftc -warnings-as-errors
