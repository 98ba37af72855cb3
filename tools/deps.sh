#!/usr/bin/env bash
# Installs exactly the Debian 12 packages tollgate needs that are missing.
# Idempotent and non-interactive; safe to run on every `make`.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git clang-format
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libboost-dev libboost-system-dev
  libhiredis-dev libssl-dev libre2-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libcpp-httplib-dev libcurl4-openssl-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libyaml-cpp-dev
  redis-server redis-tools nginx-light wrk
  python3 curl procps
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# The redis-server and nginx packages try to start their services; tests start their own.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "deps: done"
