#!/usr/bin/env bash
# Creates .venv/ at the package root with python `websockets` 17.x from PyPI, for the interop tests
# (Tests/NetTests/InteropTests.swift runs tools/interop/ws_echo_server.py with .venv/bin/python).
# Idempotent: when the venv already has websockets 17.x it prints nothing and exits 0.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=.venv
WANT='websockets>=17,<18'

have_websockets() {
    [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" -c 'import sys, websockets; sys.exit(0 if websockets.__version__.split(".")[0] == "17" else 1)' \
            >/dev/null 2>&1
}

if have_websockets; then
    exit 0
fi

# Debian's python3 (not a pyenv shim): its venv module comes from the python3-venv package.
PYTHON=/usr/bin/python3
if [ ! -x "$PYTHON" ]; then PYTHON=$(command -v python3 || true); fi
if [ -z "$PYTHON" ] || ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q 'install ok installed'; then
    echo "setup-venv: installing python3-venv" >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
    PYTHON=/usr/bin/python3
fi

echo "setup-venv: creating $VENV with $WANT" >&2
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WANT" >/dev/null
if ! have_websockets; then
    echo "setup-venv: $VENV/bin/python cannot import websockets 17 after installing; see pip's output above" >&2
    exit 1
fi
