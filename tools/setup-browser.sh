#!/usr/bin/env bash
# Installs what the viewer's browser tests need: Debian's `chromium` and `chromium-driver`, and python
# `selenium` in the project venv `.venv` (made here if no other set-up step has made it).
# Idempotent: when everything is present it prints nothing and exits 0. Exits non-zero (with a message)
# when Chromium cannot be installed; tools/test.sh then runs the tests, which skip the browser checks
# with a clear message.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for p in chromium chromium-driver; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup-browser: installing ${missing[*]}" >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup-browser: creating .venv" >&2
    python3 -m venv .venv
fi
if ! .venv/bin/python -c "import selenium" 2>/dev/null; then
    echo "setup-browser: installing selenium into .venv" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check 'selenium>=4.10,<5'
fi
