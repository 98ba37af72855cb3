#!/usr/bin/env bash
# `make package-install-test`: the tollgate .deb in a clean Debian 12 root.
#   1. debootstrap --variant=minbase bookworm (or unpack ROOT_TARBALL, a tarball of one);
#   2. apt-get install the .deb there (its dependencies come from the Debian mirror);
#   3. check what the maintainer scripts did: the system user, the conffiles, the admin
#      token (0640 root:tollgate, 64 hex digits), the unit enabled (deb-systemd-helper's symlink);
#   4. install systemd there and boot it as PID 1 in namespaces of its own (pid, mount, net,
#      uts, ipc: what systemd-nspawn does, which this machine lacks); tollgated.service must be
#      active after boot, as the user tollgate, without capabilities, under its seccomp
#      filter; answer a request; the admin listener: 401 without the token, 403 for a
#      cross-site request with it, 200 for a reload with it; `systemctl reload` while a
#      client keeps sending requests (none may fail); `systemctl reload` with an invalid
#      policy must fail and leave the same process running; `systemctl stop` must succeed
#      with exit status 0;
#   5. apt-get purge: the conffiles and the admin token go.
# Needs root (debootstrap, chroot, unshare, nsenter) and a Debian mirror (MIRROR).
# usage: tools/package_install_test.sh PACKAGE_DIR
set -euo pipefail
pkgdir=$(cd "$1" && pwd)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
deb=$(ls "$pkgdir"/tollgate_*.deb | tail -n 1)
[ "$(id -u)" = 0 ] || { echo "package-install-test: needs root (debootstrap, chroot)" >&2; exit 2; }

root=$(mktemp -d /var/tmp/tollgate-deb12.XXXXXX)
chmod 755 "$root"  # mktemp made it 0700: the root of the new system must be 0755
cleanup() {
  for m in "$root/proc" "$root/dev"; do mountpoint -q "$m" && umount -l "$m"; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $* ($(( SECONDS ))s)"; }

step "a Debian 12 root in $root"
if [ -n "${ROOT_TARBALL:-}" ]; then
  tar -C "$root" -xzf "$ROOT_TARBALL"
else
  debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$root.debootstrap.log" 2>&1 \
    || { tail -n 30 "$root.debootstrap.log"; fail "debootstrap"; }
  rm -f "$root.debootstrap.log"
fi
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

step "apt-get install $(basename "$deb")"
cp "$deb" "$root/tmp/"
in_root apt-get update -q >/dev/null
in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" >"$root/tmp/install.log" 2>&1 \
  || { tail -n 30 "$root/tmp/install.log"; fail "apt-get install"; }
grep -E '^(Setting up|Unpacking) tollgate' "$root/tmp/install.log"

step "what the maintainer scripts did"
user=$(in_root getent passwd tollgate) || fail "no user tollgate"
echo "user: $user"
uid=$(cut -d: -f3 <<<"$user")
[ "$uid" -lt 1000 ] || fail "tollgate is not a system user (uid $uid)"
[ "$(cut -d: -f7 <<<"$user")" = /usr/sbin/nologin ] || fail "tollgate can log in"
conffiles=$(in_root dpkg-query -W -f='${Conffiles}\n' tollgate | awk 'NF {print $1}' | sort | tr '\n' ' ')
[ "$conffiles" = "/etc/tollgate/policy.json /etc/tollgate/tollgated.json " ] || fail "conffiles: $conffiles"
echo "conffiles: $conffiles"
[ -L "$root/etc/systemd/system/multi-user.target.wants/tollgated.service" ] || fail "unit not enabled"
token_stat=$(in_root stat -c '%a %U:%G' /etc/tollgate/admin.token) || fail "no /etc/tollgate/admin.token"
[ "$token_stat" = "640 root:tollgate" ] || fail "admin token is $token_stat, expected 640 root:tollgate"
token=$(cat "$root/etc/tollgate/admin.token")
[[ "$token" =~ ^[0-9a-f]{64}$ ]] || fail "admin token is not 64 hex digits"
echo "admin token: /etc/tollgate/admin.token ($token_stat, 64 hex digits)"
echo "enabled: $(readlink "$root/etc/systemd/system/multi-user.target.wants/tollgated.service")"

step "apt-get install systemd, boot it in namespaces of its own (pid, mount, net, uts, ipc)"
in_root apt-get install -y -q --no-install-recommends systemd systemd-sysv curl >"$root/tmp/systemd.log" 2>&1 \
  || { tail -n 30 "$root/tmp/systemd.log"; fail "apt-get install systemd"; }
umount -l "$root/proc" "$root/dev"
# What systemd-nspawn would do: a root that is a mount point, /proc, a read-only /sys with the
# named systemd cgroup hierarchy, /run and /tmp as tmpfs, /dev; then systemd as PID 1.
unshare --pid --fork --mount --uts --net --ipc bash -euc '
  mount --make-rprivate /
  mount --bind "$0" "$0"
  mount -t proc proc "$0/proc"
  mount -t sysfs -o ro sysfs "$0/sys"
  if grep -q "^[^ ]* /sys/fs/cgroup cgroup2 " /proc/mounts; then
    mount -t cgroup2 cgroup2 "$0/sys/fs/cgroup"  # a unified host (not tried: this one is v1)
  else
    mount -t tmpfs tmpfs "$0/sys/fs/cgroup"
    mkdir -p "$0/sys/fs/cgroup/systemd"
    mount -t cgroup -o none,name=systemd cgroup "$0/sys/fs/cgroup/systemd"
  fi
  mount -t tmpfs tmpfs "$0/run"
  mount -t tmpfs tmpfs "$0/tmp"
  mount --bind /dev "$0/dev"
  exec chroot "$0" /lib/systemd/systemd --system' "$root" >"$root.boot.log" 2>&1 &
booter=$!
stop_systemd() { [ -n "${sd:-}" ] && kill -KILL "$sd" 2>/dev/null; wait "$booter" 2>/dev/null || true; rm -f "$root.boot.log"; }
trap 'stop_systemd; cleanup' EXIT
sd=
for _ in $(seq 300); do sd=$(pgrep -P "$booter" -x systemd || true); [ -n "$sd" ] && break; sleep 0.1; done
[ -n "$sd" ] || { cat "$root.boot.log"; fail "systemd did not start"; }
ns() { nsenter -t "$sd" -m -p -n -u -i -r -w "$@"; }
state=
for _ in $(seq 600); do
  state=$(ns systemctl is-system-running 2>/dev/null || true)
  case $state in running|degraded) break;; esac
  sleep 0.1
done
echo "systemd (pid $sd here) is $state"
[ "$(ns systemctl is-active tollgated)" = active ] || { ns systemctl status tollgated --no-pager || true; fail "tollgated.service is not active after boot"; }
mainpid=$(ns systemctl show -p MainPID --value tollgated)
echo "tollgated.service: active since boot, main pid $mainpid: $(ns grep -E '^(Uid|CapEff|NoNewPrivs|Seccomp):' /proc/$mainpid/status | tr -s '\t' ' ' | tr '\n' ' ')"
ns grep -q "^Uid:\s*$uid\s" /proc/$mainpid/status || fail "tollgated does not run as tollgate (uid $uid)"
ns grep -q '^CapEff:\s*0000000000000000$' /proc/$mainpid/status || fail "tollgated has capabilities"
ns grep -q '^Seccomp:\s*2$' /proc/$mainpid/status || fail "tollgated runs without its system call filter"
ns journalctl -u tollgated --no-pager -o cat | grep -q 'config and policy are valid' || fail "ExecStartPre did not run"
code=$(ns curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/v1/auth -H 'X-Original-URI: /api/items' -H 'X-Api-Key: k1')
[ "$code" = 204 ] || fail "/v1/auth answered $code"
echo "GET /v1/auth: $code"
# The admin listener needs the token postinst made, and refuses a page's request even with it.
admin() { ns curl -s -o /dev/null -w '%{http_code}' -X POST "$@"; }
code=$(admin http://127.0.0.1:9090/v1/rollback/trip?rule=none)
[ "$code" = 401 ] || fail "admin without the token answered $code"
code=$(admin -H "Authorization: Bearer $token" -H 'Origin: http://evil.example' http://127.0.0.1:9090/v1/rollback/clear?rule=none)
[ "$code" = 403 ] || fail "a cross-site admin request answered $code"
code=$(admin -H "Authorization: Bearer $token" http://127.0.0.1:9090/v1/reload)
[ "$code" = 200 ] || fail "admin reload with the token answered $code"
echo "admin: 401 without the token, 403 cross-site, 200 with the token"

step "systemctl reload while a client sends requests"
# The client runs in the root's namespaces and reports after each request; every answer must
# be a decision (204, or 403 with the marker), none a failure.
ns sh -c 'n=0; bad=0; while [ ! -e /tmp/stop ]; do
    c=$(curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:8080/v1/auth -H "X-Original-URI: /x" -H "X-Api-Key: k2")
    n=$((n + 1)); case $c in 204|403) ;; *) bad=$((bad + 1)); echo "answer $c" >&2;; esac
    echo "$n $bad" >/tmp/client.new; mv /tmp/client.new /tmp/client
  done' &
client=$!
sent() { ns cat /tmp/client 2>/dev/null | cut -d' ' -f1 | grep . || echo 0; }
wait_sent() { for _ in $(seq 600); do [ "$(sent)" -ge "$1" ] && return 0; sleep 0.05; done; fail "the client stalled at $(sent) requests"; }
wait_sent 50
before=$(sent)
ns systemctl reload tollgated || fail "systemctl reload tollgated failed"
ns journalctl -u tollgated --no-pager -o cat | grep '"msg":"policy_reloaded"' | grep -q '"trigger":"sighup"' \
  || fail "no policy_reloaded (sighup) after systemctl reload"
wait_sent $(( $(sent) + 50 ))
ns touch /tmp/stop; wait $client
read -r n bad < <(ns cat /tmp/client)
[ "$bad" = 0 ] || fail "$bad of $n requests failed across the reload"
echo "systemctl reload: policy_reloaded (sighup); requests: $n ($before before the reload), failed: $bad"
cp "$root/etc/tollgate/policy.json" "$root/tmp/policy.good"
echo '{"rules": [{"name": "broken"}]}' >"$root/etc/tollgate/policy.json"
if ns systemctl reload tollgated 2>/dev/null; then fail "systemctl reload accepted an invalid policy"; fi
[ "$(ns systemctl is-active tollgated)" = active ] || fail "an invalid policy stopped tollgated"
[ "$(ns systemctl show -p MainPID --value tollgated)" = "$mainpid" ] || fail "an invalid policy restarted tollgated"
cp "$root/tmp/policy.good" "$root/etc/tollgate/policy.json"
echo "systemctl reload with an invalid policy: fails, tollgated keeps running (pid $mainpid)"

step "systemctl stop"
ns systemctl stop tollgated
result=$(ns systemctl show -p Result --value tollgated)/$(ns systemctl show -p ExecMainStatus --value tollgated)
[ "$result" = success/0 ] || fail "stop: $result"
echo "systemctl stop: $result ($(ns journalctl -u tollgated --no-pager -o cat | grep -o '"msg":"stopped"[^}]*' | tail -n 1))"
stop_systemd
sd=
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"

step "apt-get purge tollgate"
in_root apt-get purge -y -q tollgate >/dev/null 2>&1 || fail "apt-get purge"
[ ! -e "$root/etc/tollgate/tollgated.json" ] || fail "purge left /etc/tollgate/tollgated.json"
[ ! -e "$root/usr/bin/tollgated" ] || fail "purge left /usr/bin/tollgated"
[ ! -e "$root/etc/tollgate/admin.token" ] || fail "purge left /etc/tollgate/admin.token"
echo "purged: /etc/tollgate and /usr/bin/tollgated are gone"
step "PASS"
