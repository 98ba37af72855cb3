#!/usr/bin/env bash
# The Debian packages `make package` builds (cmake/Packaging.cmake), checked as a user of
# them would meet them: cpack builds both .debs from this build tree, then
#   - lintian finds no error and no warning in either, and (in a TOLLGATE_HARDENING build)
#     no hardening-* tag at all;
#   - the tollgate package has its binaries in /usr/bin, exactly the two conffiles, the unit,
#     the sysusers entry, and maintainer scripts that create the user, make the admin token
#     (which the packaged config requires) and enable the unit;
#   - `systemd-analyze verify` accepts the unit (against the unpacked package as root), and
#     `systemd-analyze security --offline` rates its sandbox at most THRESHOLD;
#   - the packaged tollgated --check accepts the packaged config and policy;
#   - libtollgate-dev holds the headers, libraries, CMake package and pkg-config file, and a
#     CMake project configures against it with find_package(tollgate).
# usage: package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
# The sandbox's exposure as systemd rates it (0 = fully locked down, 10 = none); the unit
# measures 1.2; without its sandbox lines (ProtectSystem, SystemCallFilter, ...) 6.6.
THRESHOLD=${THRESHOLD:-20}  # in tenths, as --threshold takes it: 2.0

work=$(mktemp -d "$build/package_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cpack --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 \
  || { cat "$work/cpack.log"; fail "cpack"; }
server_deb=$(ls "$work"/out/tollgate_*.deb)
dev_deb=$(ls "$work"/out/libtollgate-dev_*.deb)
echo "built: $(basename "$server_deb") $(basename "$dev_deb")"

# lintian: --fail-on makes a warning fail too; every tag is shown (no display limit).
for deb in "$server_deb" "$dev_deb"; do
  # (pipefail: the pipeline fails when lintian does.)
  if ! lintian --fail-on error,warning --tag-display-limit 0 --display-info "$deb" 2>&1 \
      | { grep -v 'running with root privileges' || true; } >"$work/lintian.log"; then
    cat "$work/lintian.log"
    fail "lintian $(basename "$deb")"
  fi
  # Hardening (TOLLGATE_HARDENING, on by default): lintian reports a binary without
  # fortified functions, relro, bindnow or PIE as hardening-* (info or warning): none may show.
  if grep -q '^TOLLGATE_HARDENING:BOOL=ON' "$build/CMakeCache.txt" \
      && grep -q 'hardening-' "$work/lintian.log"; then
    cat "$work/lintian.log"
    fail "lintian hardening tags in $(basename "$deb")"
  fi
  echo "lintian $(basename "$deb"): clean$(test -s "$work/lintian.log" && printf ' (info only:\n%s)' "$(cat "$work/lintian.log")")"
done

# The package unpacked over a copy of this machine's systemd units and /bin/kill (the unit's
# ExecReload), so that systemd-analyze --root finds the targets it orders against.
root=$work/root
mkdir -p "$root/lib/systemd" "$root/bin"
cp -a /lib/systemd/system "$root/lib/systemd/"
cp -a /bin/kill "$root/bin/"
dpkg-deb -x "$server_deb" "$root"
dpkg-deb -e "$server_deb" "$work/control"
for f in usr/bin/tollgated usr/bin/tollgate; do
  [ -x "$root/$f" ] || fail "/$f is not in the package"
done
for f in lib/systemd/system/tollgated.service usr/lib/sysusers.d/tollgate.conf \
         etc/tollgate/tollgated.json etc/tollgate/policy.json \
         usr/share/man/man1/tollgated.1.gz usr/share/doc/tollgate/copyright; do
  [ -f "$root/$f" ] || fail "/$f is not in the package"
done
expected=$'/etc/tollgate/policy.json\n/etc/tollgate/tollgated.json'
actual=$(sort "$work/control/conffiles")
[ "$actual" = "$expected" ] || fail "conffiles are '$actual', expected '$expected'"
grep -q 'systemd-sysusers tollgate.conf' "$work/control/postinst" || fail "postinst creates no user"
grep -q "deb-systemd-helper enable 'tollgated.service'" "$work/control/postinst" \
  || fail "postinst does not enable the unit"
# The admin token: made by postinst from /dev/urandom (0640 root:tollgate, only if absent),
# named by the packaged config, removed on purge.
grep -q 'od -An -tx1 -N32 /dev/urandom' "$work/control/postinst" || fail "postinst makes no admin token"
grep -q 'chmod 0640 /etc/tollgate/admin.token' "$work/control/postinst" || fail "admin token mode"
grep -q 'chown root:tollgate /etc/tollgate/admin.token' "$work/control/postinst" || fail "admin token owner"
grep -q '"token_file": "/etc/tollgate/admin.token"' "$root/etc/tollgate/tollgated.json" \
  || fail "the packaged config does not require the admin token"
grep -q 'rm -f /etc/tollgate/admin.token' "$work/control/postrm" || fail "purge leaves the admin token"
grep -q '^u tollgate ' "$root/usr/lib/sysusers.d/tollgate.conf" || fail "sysusers entry"

# The unit, verified with the package's files in place (its ExecStart binaries must exist).
unit=$root/lib/systemd/system/tollgated.service
grep -q '^User=tollgate$' "$unit" || fail "the unit does not run as the user tollgate"
SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --root="$root" --man=no \
  /lib/systemd/system/tollgated.service >"$work/verify.log" 2>&1 \
  || { cat "$work/verify.log"; fail "systemd-analyze verify"; }
[ ! -s "$work/verify.log" ] || { cat "$work/verify.log"; fail "systemd-analyze verify printed warnings"; }
# The socket units (socket activation, not enabled by the package) pass the same verification.
for socket in tollgated.socket tollgated-admin.socket; do
  [ -f "$root/lib/systemd/system/$socket" ] || fail "/lib/systemd/system/$socket is not in the package"
  SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --root="$root" --man=no \
    "/lib/systemd/system/$socket" >"$work/verify.log" 2>&1 \
    || { cat "$work/verify.log"; fail "systemd-analyze verify $socket"; }
  [ ! -s "$work/verify.log" ] || { cat "$work/verify.log"; fail "verify $socket printed warnings"; }
done
echo "systemd-analyze verify: clean"
systemd-analyze security --offline=yes --root="$root" --threshold="$THRESHOLD" \
  /lib/systemd/system/tollgated.service >"$work/security.log" 2>&1 \
  || { cat "$work/security.log"; fail "systemd-analyze security: exposure above $THRESHOLD"; }
echo "systemd-analyze security: $(grep -o 'Overall exposure level.*' "$work/security.log")"

# The packaged binary accepts the packaged config (the unit's ExecStartPre), with the
# policy read from the unpacked root instead of /etc and a token as postinst makes one.
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/admin.token"
echo >>"$work/admin.token"
sed "s|/etc/tollgate/admin.token|$work/admin.token|" "$root/etc/tollgate/tollgated.json" \
  >"$work/tollgated.json"
"$root/usr/bin/tollgated" --check --config "$work/tollgated.json" \
  --policy "$root/etc/tollgate/policy.json" >"$work/check.log" 2>&1 \
  || { cat "$work/check.log"; fail "tollgated --check refuses the packaged config"; }
echo "tollgated --check: the packaged config and policy are valid"

# The development package: files, then a CMake project that finds it.
dev=$work/dev
dpkg-deb -x "$dev_deb" "$dev"
# Libraries in Debian's multiarch directory, like Debian's own -dev packages.
libdir=usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for f in usr/include/tollgate/limiter.h "$libdir/cmake/tollgate/tollgateConfig.cmake" \
         "$libdir/pkgconfig/tollgate.pc" "$libdir/libtollgate_core.a"; do
  [ -e "$dev/$f" ] || fail "/$f is not in libtollgate-dev"
done
if dpkg-deb -c "$dev_deb" | grep -q 'usr/bin/'; then fail "libtollgate-dev carries binaries"; fi
mkdir -p "$work/consumer"
cat >"$work/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
find_package(tollgate REQUIRED)
get_target_property(libs tollgate::tollgate INTERFACE_LINK_LIBRARIES)
message(STATUS "tollgate::tollgate links ${libs}")
CMAKE
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$dev/usr" \
  >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "find_package(tollgate)"; }
echo "find_package(tollgate) against libtollgate-dev: ok"
echo "PASS"
