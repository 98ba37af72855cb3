#!/usr/bin/env bash
# Installs exactly the Debian 12 packages tollgate needs (to build, and to run every test)
# that are missing, then the tests' npm packages (tests/node, pinned by its package-lock.json). Idempotent, non-interactive and quiet: safe to run on every `make`.
#
# As root it runs apt-get itself; as another user it uses `sudo -n` (never a password prompt).
# Without root or password-less sudo it installs nothing: it prints the one apt-get command to
# run and exits 1. apt and dpkg write to a log file; only a summary line is printed, and the
# log's end on failure.
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake ninja-build ccache lld pkg-config git clang-format
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libboost-dev libboost-system-dev
  libhiredis-dev libssl-dev libre2-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libcpp-httplib-dev libcurl4-openssl-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libyaml-cpp-dev
  # the fuzz targets (libFuzzer)
  clang-14 libclang-rt-14-dev
  # peers and tools the tests start or call
  redis-server redis-tools redis-sentinel nginx-light haproxy caddy wrk etcd-server etcd-client prometheus lintian
  python3 python3-h11 curl openssl procps tzdata
  # the status page's browser tests (tests/server/status_page_test.cc)
  chromium
  # the Debian package: cpack's dependency list, systemd-analyze in make test; debootstrap
  # and ip for make package-install-test
  dpkg-dev systemd debootstrap iproute2
)

# Node.js and npm for the Node gRPC clients of the tests (tests/node): Debian's packages, unless
# the machine has a node and npm of its own already (a NodeSource nodejs ships npm inside, and
# Debian's npm package would conflict with it).
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

# One dpkg-query for all of them: the common case (nothing missing) stays fast.
declare -A installed=()
while read -r name status; do
  [ "$status" = "installed" ] && installed[${name%%:*}]=1
done < <(dpkg-query -W -f='${binary:Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)
missing=()
for p in "${PACKAGES[@]}"; do
  [ -n "${installed[$p]:-}" ] || missing+=("$p")
done

# The tests' npm packages (tests/node/package-lock.json, exact versions) into
# tests/node/node_modules with `npm ci`, once per lock file: a stamp holding the lock's hash
# says they are installed, so a second run (and an offline machine that has them) asks no
# registry. npm's failure (no network) is a warning: everything builds, and the Node tests say
# what is missing.
node_packages() {
  local dir
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/node"
  local stamp="$dir/node_modules/.tollgate-lock.sha256"
  [ -f "$dir/package-lock.json" ] || return 0
  local want
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "deps: npm is missing: the Node tests (tests/node) cannot be installed" >&2
    return 0
  fi
  # Installed beside, then swapped in: a failed npm ci (offline) leaves the old node_modules.
  local work
  work=$(mktemp -d "$dir/.npm-install.XXXXXX")
  cp "$dir/package.json" "$dir/package-lock.json" "$work/"
  # --prefer-offline: what npm's cache holds is not fetched again. --ignore-scripts: no
  # package runs code at install (none of ours needs to).
  if (cd "$work" && npm ci --prefer-offline --ignore-scripts --no-audit --no-fund \
    >"$work/npm.log" 2>&1); then
    echo "$want" >"$work/node_modules/.tollgate-lock.sha256"
    rm -rf "$dir/node_modules"
    mv "$work/node_modules" "$dir/node_modules"
    echo "deps: installed tests/node's npm packages (npm ci)"
  else
    echo "deps: warning: 'npm ci' in tests/node failed (its node_modules unchanged: the Node tests need it). Its log's end:" >&2
    tail -n 20 "$work/npm.log" >&2
  fi
  rm -rf "$work"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PACKAGES[@]} packages present"
  node_packages
  exit 0
fi

install_cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  # sudo resets the environment, so DEBIAN_FRONTEND goes on the command line below.
  SUDO=(sudo -n)
else
  echo "deps: missing: ${missing[*]}" >&2
  if command -v sudo >/dev/null 2>&1; then
    echo "deps: installing them needs root, and sudo asks for a password here. Run:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  else
    echo "deps: installing them needs root, and sudo is not installed. Run as root:" >&2
    echo "  $install_cmd" >&2
  fi
  echo "deps: then run make again." >&2
  exit 1
fi
as_root() { "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive "$@"; }

log=$(mktemp "${TMPDIR:-/tmp}/tollgate-deps.XXXXXX.log")
cleanup() {
  if [ -n "${policy_rc_d:-}" ]; then as_root rm -f /usr/sbin/policy-rc.d; fi
}
trap cleanup EXIT
failed() {
  echo "deps: '$1' failed; the end of its log ($log):" >&2
  tail -n 40 "$log" >&2
  exit 1
}

echo "deps: installing ${#missing[@]} packages: ${missing[*]}"
# redis-server, nginx, etcd and prometheus start their services when installed; the tests
# start their own. policy-rc.d (exit 101) tells invoke-rc.d not to start anything.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
  as_root chmod +x /usr/sbin/policy-rc.d
  policy_rc_d=1
fi
start=$SECONDS
as_root apt-get update >>"$log" 2>&1 || failed "apt-get update"
as_root apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}" \
  >>"$log" 2>&1 || failed "apt-get install"
unpacked=$(grep -c '^Setting up ' "$log" || true)
echo "deps: installed ${#missing[@]} packages ($unpacked with their dependencies) in $((SECONDS - start)) s"
rm -f "$log"
node_packages
