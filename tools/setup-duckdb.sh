#!/usr/bin/env bash
# Makes the project venv `.venv` (if another set-up step has not) and installs DuckDB's Python package
# into it, for the tests that read `relaytrace export --format jsonl` (read_json_auto, the typed schema of
# docs/schema/, the DuckDB half of tools/fleet_queries.py).
# Idempotent: when duckdb already imports it prints nothing and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    echo "setup-duckdb: creating .venv" >&2
    python3 -m venv .venv
fi
if ! .venv/bin/python -c "import duckdb" 2>/dev/null; then
    echo "setup-duckdb: installing duckdb into .venv" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check duckdb
fi
