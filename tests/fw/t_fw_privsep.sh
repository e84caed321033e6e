#!/bin/sh
# t_fw_privsep.sh: sluiced's process model (sluiced(8), PROCESS MODEL).
# Started as root with the firewall enabled, sluiced is two processes:
# the proxy runs as an unprivileged user with no capabilities and
# no_new_privs, the firewall helper keeps CAP_NET_ADMIN alone; reloads
# go through the helper; the helper refuses malformed requests and
# other programs' tables; killing the proxy ends the helper and leaves
# the rules.  All inside a network namespace made for this test only.
#
# Outside: record the host namespace, re-exec under `unshare -n`.  Exit
# 77 (skip) when unshare is impossible or not root, or 1 with
# SLUICE_TEST_STRICT=1.  Inside: refuse to run in the recorded host one.
set -u

. "$(dirname "$0")/lib.sh"
if [ "${1:-}" != --inside ]; then
	[ "$(id -u)" = 0 ] || skip "needs root"
	id nobody >/dev/null 2>&1 || skip "no user nobody"
fi
fw_netns "${1:-}" nft curl

fw_tmp
fw_tables="sluice foreign"
nobody=$(id -u nobody)
# the proxy's files (state, log, runtime_dir) live in $tmp: the user's
chown nobody "$tmp" && chmod 755 "$tmp" || fail "chown $tmp"

# config FILE ENABLED DENY [USER]
config() {
	cat > "$1" <<EOF
{
  "runtime_dir": "$tmp/run",
  "state_file": "$tmp/state.json",
  "user": "${4:-nobody}",
  "log": { "path": "$tmp/conn.jsonl" },
  "deny_cidrs": [$3],
  "dns": { "servers": ["10.0.0.3"] },
  "firewall": { "enabled": $2, "uid": $nobody,
                "sandbox_subnets": ["10.77.0.0/16"],
                "broker_ports": [3128] }
}
EOF
}
# field PID NAME: the value of NAME: in /proc/PID/status
field() {
	sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"
}
# children PID: the child processes of PID
children() {
	cat "/proc/$1/task/$1/children" 2>/dev/null || pgrep -P "$1"
}
# gone PID: the process has exited (gone, or a zombie nobody reaped yet)
gone() {
	[ ! -e "/proc/$1/status" ] || [ "$(field "$1" State | cut -c1)" = Z ]
}
same() {
	"$sluiced" --print-firewall -c "$1" > "$tmp/want" || fail "print $1"
	nft list table inet sluice > "$tmp/got" 2>/dev/null &&
	    cmp -s "$tmp/want" "$tmp/got"
}

# 1. two processes: the proxy (the pid we started) and one child, the
#    helper
config "$tmp/a.json" true '"192.0.2.0/24"'
fw_start "$tmp/a.json"
helper=$(echo $(children "$pid"))
[ -n "$helper" ] || fail "no helper process"
[ "$(echo $helper | wc -w)" = 1 ] || fail "more than one child: $helper"
[ "$(field "$helper" Name)" = sluiced-fw ] || fail "helper name"
same "$tmp/a.json" || { diff -u "$tmp/want" "$tmp/got" >&2; fail "start table"; }

# 2. the proxy: the user's uids and gids, no capability in any set,
#    no_new_privs
for v in $(field "$pid" Uid); do
	[ "$v" = "$nobody" ] || fail "proxy Uid: $(field "$pid" Uid)"
done
for v in $(field "$pid" Gid); do
	[ "$v" != 0 ] || fail "proxy Gid: $(field "$pid" Gid)"
done
for f in CapInh CapPrm CapEff CapBnd CapAmb; do
	[ "$(field "$pid" $f)" = 0000000000000000 ] ||
	    fail "proxy $f: $(field "$pid" $f)"
done
[ "$(field "$pid" NoNewPrivs)" = 1 ] || fail "proxy NoNewPrivs"
grep -q "proxy process running as user nobody" "$tmp/err" ||
    fail "no drop logged"

# 3. the helper: CAP_NET_ADMIN (bit 12) alone, in every set that has
#    it; not root; no_new_privs; no descriptor but 0-2 and its socket
for v in $(field "$helper" Uid); do
	[ "$v" != 0 ] || fail "helper Uid: $(field "$helper" Uid)"
done
for f in CapPrm CapEff CapBnd; do
	[ "$(field "$helper" $f)" = 0000000000001000 ] ||
	    fail "helper $f: $(field "$helper" $f)"
done
for f in CapInh CapAmb; do
	[ "$(field "$helper" $f)" = 0000000000000000 ] ||
	    fail "helper $f: $(field "$helper" $f)"
done
[ "$(field "$helper" NoNewPrivs)" = 1 ] || fail "helper NoNewPrivs"
n=$(ls "/proc/$helper/fd" | wc -l)
[ "$n" -le 4 ] || { ls -l "/proc/$helper/fd" >&2; fail "helper holds $n fds"; }

# 4. after the drop the proxy still makes sockets (a session through
#    the control API, as root: root is always admin), owned by the user
api -X POST -H 'Content-Type: application/json' \
    -d '{"id":"s1","tenant":"acme","user":"alice","tier":"public"}' \
    http://sluice/v1/sessions >/dev/null || fail "POST /v1/sessions"
sock=$tmp/run/sessions/s1/proxy.sock
[ -S "$sock" ] || fail "no session socket"
[ "$(stat -c %u "$sock")" = "$nobody" ] || fail "session socket owner"
[ "$(stat -c %u "$tmp/state.json")" = "$nobody" ] || fail "state file owner"

# 5. SIGHUP with a new deny_cidr: re-applied through the helper
config "$tmp/b.json" true '"192.0.2.0/24", "198.51.100.0/24"'
cp "$tmp/b.json" "$tmp/a.json"
kill -HUP "$pid"
wait_same "$tmp/b.json" "reload table"
grep -q '198\.51\.100\.0/24' "$tmp/got" || fail "new deny_cidr missing"
[ "$(api http://sluice/v1/health | "$py" -c 'import json,sys
print(json.load(sys.stdin)["firewall"]["status"])')" = applied ] ||
    fail "health after reload"

# 6. what a compromised proxy could send: the test takes the proxy's
#    end of the socketpair (pidfd_getfd, as root) and sends garbage and
#    an APPLY for another program's table; both are refused, the other
#    table is untouched, the helper keeps serving
nft add table inet foreign || fail "foreign table"
forged=0
"$py" - "$pid" <<'EOF' || forged=$?
import ctypes, os, socket, struct, sys
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
pidfd = libc.syscall(434, pid, 0)                  # pidfd_open
if pidfd < 0:
    print("t_fw_privsep: pidfd_open:", os.strerror(ctypes.get_errno()))
    sys.exit(77)
sock = None
denied = 0
for name in os.listdir("/proc/%d/fd" % pid):
    fd = libc.syscall(438, pidfd, int(name), 0)    # pidfd_getfd
    if fd < 0:
        denied += ctypes.get_errno() == 1
        continue
    try:
        s = socket.socket(fileno=fd)
    except OSError:
        os.close(fd)
        continue
    if s.type == socket.SOCK_SEQPACKET:
        sock = s
        break
    s.detach()
    os.close(fd)
if sock is None and denied:
    print("t_fw_privsep: pidfd_getfd not permitted (no CAP_SYS_PTRACE?)")
    sys.exit(77)
assert sock is not None, "no SOCK_SEQPACKET socket in the proxy"
sock.settimeout(10)

def reply():
    b = sock.recv(4096)
    magic, ver, typ, n = struct.unpack(">HBBI", b[:8])
    assert magic == 0x534c and ver == 1 and n == len(b) - 8, b
    (tl,) = struct.unpack(">H", b[8:10])
    return typ, b[10:10 + tl].decode()

def s8(x):
    return bytes([len(x)]) + x.encode()

sock.send(b"\x00" * 40)
typ, text = reply()
assert typ == 0x82 and "malformed request refused" in text, (typ, text)
sock.send(struct.pack(">HBBI", 0x534c, 1, 1, 3) + b"\x01x\x07")
typ, text = reply()
assert typ == 0x82 and "malformed" in text, (typ, text)
# six empty lists (allow, deny, resolvers, subnets, interfaces, broker
# addresses), no broker ports, no transparent port
p = s8("foreign") + struct.pack(">BI", 0, 0) + b"\x00\x00" * 6 + b"\x00\x00" * 2
sock.send(struct.pack(">HBBI", 0x534c, 1, 1, len(p)) + p)
typ, text = reply()
assert typ == 0x82 and "not sluiced's" in text, (typ, text)
print("t_fw_privsep: helper refused:", text)
EOF
case $forged in
0) ;;
77) [ "${SLUICE_TEST_STRICT:-0}" = 1 ] && fail "cannot take the socket"
    echo "t_fw_privsep: forged messages not sent (see above)" >&2 ;;
*) fail "messages to the helper" ;;
esac
[ "$(nft list table inet foreign | grep -c .)" -le 2 ] ||
    fail "the foreign table changed"
gone "$helper" && fail "helper died on bad messages"
kill -HUP "$pid"
sleep 0.5
same "$tmp/b.json" || fail "table after the bad messages"
api http://sluice/v1/health | grep -q '"status":"applied"' ||
    fail "helper not serving after the bad messages"

# 7. SIGKILL of the proxy: the helper exits, the rules stay
kill -KILL "$pid" && wait "$pid" 2>/dev/null
pid=
i=0
until gone "$helper"; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "helper outlived the proxy"
	sleep 0.1
done
same "$tmp/b.json" || fail "table gone after SIGKILL"

# 8. firewall disabled: no helper at all, the proxy drops all the same
config "$tmp/c.json" false '"192.0.2.0/24"'
fw_start "$tmp/c.json"
[ -z "$(echo $(children "$pid"))" ] ||
    fail "a helper with the firewall disabled"
[ "$(field "$pid" CapBnd)" = 0000000000000000 ] || fail "disabled: CapBnd"
[ "$(field "$pid" NoNewPrivs)" = 1 ] || fail "disabled: NoNewPrivs"
#    enabling it on reload needs the helper: refused, clearly
cp "$tmp/b.json" "$tmp/c.json"
kill -HUP "$pid"
i=0
until grep -q "enabling it takes a restart" "$tmp/err"; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "enable on reload not refused"
	sleep 0.1
done
kill -KILL "$pid" && wait "$pid" 2>/dev/null
pid=

# 9. a user that does not exist: sluiced refuses to start as root
config "$tmp/d.json" true '"192.0.2.0/24"' sluice-no-such-user
"$sluiced" -c "$tmp/d.json" 2>"$tmp/err" && fail "started without its user"
grep -q 'user "sluice-no-such-user" does not exist' "$tmp/err" ||
    fail "no clear message for a missing user"
rm -f "$tmp/err"
echo "t_fw_privsep: ok"
