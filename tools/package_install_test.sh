#!/usr/bin/env bash
# `make package-install-test`: the tollgate .deb in a clean Debian 12 root.
#   1. debootstrap --variant=minbase bookworm (or unpack ROOT_TARBALL, a tarball of one);
#   2. apt-get install the .deb there (its dependencies come from the Debian mirror);
#   3. check what the maintainer scripts did: the system user, the conffiles, the unit
#      enabled (deb-systemd-helper's symlink);
#   4. run tollgated the way its unit does, in a network namespace of its own: ExecStartPre,
#      then ExecStart as User=tollgate with no capabilities and no_new_privs, then answer
#      requests, then ExecReload (check + SIGHUP) while a client keeps sending requests (none
#      may fail), then SIGTERM (exit 0);
#   5. apt-get purge: the conffiles go.
# The container this was written in has no systemd as PID 1, so step 4 runs the unit's command
# lines and user, not systemd's sandbox (systemd-analyze checks that part: tests/package).
# Needs root (debootstrap, chroot, unshare) and a Debian mirror (MIRROR).
# usage: tools/package_install_test.sh PACKAGE_DIR
set -euo pipefail
pkgdir=$(cd "$1" && pwd)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
deb=$(ls "$pkgdir"/tollgate_*.deb | tail -n 1)
[ "$(id -u)" = 0 ] || { echo "package-install-test: needs root (debootstrap, chroot)" >&2; exit 2; }

root=$(mktemp -d /var/tmp/tollgate-deb12.XXXXXX)
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
echo "enabled: $(readlink "$root/etc/systemd/system/multi-user.target.wants/tollgated.service")"

# The unit's command lines, as systemd would run them (the first word is the binary).
unit=$root/lib/systemd/system/tollgated.service
unit_value() { sed -n "s/^$1=//p" "$unit"; }
[ "$(unit_value User)" = tollgate ] || fail "the unit's User is not tollgate"
mapfile -t pre < <(unit_value ExecStartPre)
start=$(unit_value ExecStart)
mapfile -t reload < <(unit_value ExecReload)
# As User=tollgate, without capabilities (CapabilityBoundingSet=), with NoNewPrivileges=.
as_unit_user=(setpriv --reuid=tollgate --regid=tollgate --init-groups --no-new-privs
              --bounding-set=-all --inh-caps=-all)

step "run tollgated as the unit does, in a private network namespace"
export root start uid
export pre_cmd="${pre[0]}" reload_check="${reload[0]}" reload_signal="${reload[1]}"
export as_unit_user_cmd="${as_unit_user[*]}"
unshare --net bash -euo pipefail <<'NETNS'
fail() { echo "FAIL: $*" >&2; exit 1; }
ip link set lo up
run() { chroot "$root" env -i PATH=/usr/bin:/bin $as_unit_user_cmd "$@"; }
run $pre_cmd || fail "ExecStartPre ($pre_cmd) refused the packaged config"
echo "ExecStartPre: $pre_cmd: exit 0"
chroot "$root" env -i PATH=/usr/bin:/bin $as_unit_user_cmd $start 2>"$root/tmp/tollgated.log" &
MAINPID=$!  # chroot, env and setpriv exec: this is tollgated's pid
trap 'kill -KILL $MAINPID 2>/dev/null || true' EXIT
ok=
for _ in $(seq 300); do
  if curl -sf -o /dev/null http://127.0.0.1:8080/healthz; then ok=1; break; fi
  kill -0 $MAINPID 2>/dev/null || break
  sleep 0.1
done
[ -n "$ok" ] || { cat "$root/tmp/tollgated.log"; fail "tollgated did not answer /healthz"; }
pid=$MAINPID
[ "$(cat /proc/$pid/comm)" = tollgated ] || fail "pid $pid is $(cat /proc/$pid/comm), not tollgated"
grep -q "^Uid:\s*$uid\s" /proc/$pid/status || fail "tollgated does not run as tollgate (uid $uid)"
echo "ExecStart: $start: pid $pid, $(grep -E '^(Uid|CapEff|NoNewPrivs)' /proc/$pid/status | tr -s '\t' ' ' | tr '\n' ' ')"
grep -q '^CapEff:\s*0000000000000000$' /proc/$pid/status || fail "tollgated has capabilities"
code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/v1/auth -H 'X-Original-URI: /api/items' -H 'X-Api-Key: k1')
[ "$code" = 204 ] || fail "/v1/auth answered $code"
echo "GET /v1/auth: $code"

# A client sending requests one after another across the reload; every answer must be a
# decision (204, or 403 with the marker), none a failure. It reports after each request.
( n=0; bad=0
  while [ ! -e "$root/tmp/stop" ]; do
    c=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/v1/auth -H 'X-Original-URI: /api/items' -H 'X-Api-Key: k2')
    n=$((n + 1)); case $c in 204|403) ;; *) bad=$((bad + 1)); echo "reload: answer $c" >&2;; esac
    echo "$n $bad" >"$root/tmp/client.new"; mv "$root/tmp/client.new" "$root/tmp/client"
  done ) &
client=$!
sent() { [ -s "$root/tmp/client" ] && cut -d' ' -f1 "$root/tmp/client" || echo 0; }
wait_sent() { for _ in $(seq 600); do [ "$(sent)" -ge "$1" ] && return 0; sleep 0.05; done; fail "the client stalled at $(sent) requests"; }
wait_sent 50
before=$(sent)
run $reload_check >/dev/null || fail "ExecReload's check refused the config"
eval "${reload_signal//\$MAINPID/$pid}"
reloaded() { grep '"msg":"policy_reloaded"' "$root/tmp/tollgated.log" | grep -q '"trigger":"sighup"'; }
for _ in $(seq 300); do reloaded && break; sleep 0.1; done
reloaded || { cat "$root/tmp/tollgated.log"; fail "no policy_reloaded (sighup) in the log"; }
echo "ExecReload: $reload_check; $reload_signal: $(grep '"msg":"policy_reloaded"' "$root/tmp/tollgated.log" | head -n 1)"
wait_sent $(( $(sent) + 50 ))  # 50 more after the reload is logged
touch "$root/tmp/stop"; wait $client
read -r n bad <"$root/tmp/client"
[ "$bad" = 0 ] || fail "$bad of $n requests failed across the reload"
echo "requests: $n ($before before the reload began, the rest during and after it), failed: $bad"

kill -TERM $pid
rc=0; wait $MAINPID || rc=$?
[ "$rc" = 0 ] || { cat "$root/tmp/tollgated.log"; fail "tollgated exited $rc after SIGTERM"; }
echo "SIGTERM: exit 0"
NETNS

step "apt-get purge tollgate"
in_root apt-get purge -y -q tollgate >/dev/null 2>&1 || fail "apt-get purge"
[ ! -e "$root/etc/tollgate/tollgated.json" ] || fail "purge left /etc/tollgate/tollgated.json"
[ ! -e "$root/usr/bin/tollgated" ] || fail "purge left /usr/bin/tollgated"
echo "purged: /etc/tollgate and /usr/bin/tollgated are gone"
step "PASS"
