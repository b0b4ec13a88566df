#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test RelayTrace.
# Idempotent: when everything is present it prints nothing and exits 0.
set -euo pipefail

# Debian packages the build and the tests need.
#   libzstd-dev  CZstd system library (trace compression)
#   libssl-dev   COpenSSL system library (HMAC redaction, SHA-1 handshake, TLS)
#   pkg-config   how SwiftPM finds both
#   zstd         tests check that trace files are valid zstd streams (`zstd -t`, `zstd -dc`)
#   openssl      tests make their own throw-away certificates
#   libsqlite3-dev  CSQLite system library (the offline action queue store)
#   tshark       tests decode `relaytrace export --format pcapng` with Wireshark's websocket dissector
#   libqrencode-dev  CQRencode system library (the QR of a device-link code)
#   zbar-tools   tests decode the link code's PNG QR with `zbarimg`
PACKAGES=(libzstd-dev libssl-dev libsqlite3-dev pkg-config zstd openssl tshark libqrencode-dev zbar-tools)

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1; then
    echo "setup: no 'swift' on PATH; RelayTrace needs the Swift 6 toolchain" >&2
    exit 1
fi
