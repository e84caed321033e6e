# tests/fw/lib.sh: the common part of the tests/fw/t_fw_*.sh scripts,
# sourced by each of them from its own directory (". "$(dirname "$0")/lib.sh"),
# which the test driver names both in tree and in a VPATH build.
#
# The safety guards live here once, so every script has the same ones:
#   fw_netns: outside, record the host namespace and re-exec under
#     `unshare -n`; inside, refuse to run in the recorded host namespace
#   fw_tmp: the temporary directory and the exit trap that stops every
#     process the script started and removes what it made, on every exit
#
# Variables set here (src, bld: the source and build trees; sluiced,
# py, probe: the sluiced, python and netprobe.py to run) and by the
# script, read by these functions:
#   pid                   the sluiced this script started, if running
#   pids                  further processes it started (killed with -KILL)
#   fw_tables             nft tables (inet) to delete at exit
# Functions a script may define, called if present:
#   fw_cleanup_hook       extra cleanup at exit, after the processes
#   fw_fail_hook          extra diagnostics of fail, after sluiced's stderr

fw_name=$(basename "$0" .sh)
src=${SLUICE_SRCDIR:-.}
bld=${SLUICE_BUILDDIR:-.}
sluiced=$bld/proxy/sluiced
py=${PYTHON3:-python3}
probe=$src/tests/fw/netprobe.py
pid=
pids=
fw_tables=

# skip MSG: exit 77, or 1 under SLUICE_TEST_STRICT=1 (a skip is a failure)
skip() {
	echo "$fw_name: $*" >&2
	[ "${SLUICE_TEST_STRICT:-0}" = 1 ] && exit 1
	exit 77
}

# fw_netns "${1:-}" TOOL...: called with the script's first argument.
# Outside (no --inside): skip unless every TOOL and `unshare -n` work,
# then re-exec the script under `unshare -n` with the host namespace in
# SLUICE_FW_HOST_NETNS.  Inside: exit 1 if the namespace is still the
# host's (or unknown); $here is the namespace.
fw_netns() {
	if [ "$1" != --inside ]; then
		shift
		for _t in unshare "$@"; do
			command -v "$_t" >/dev/null 2>&1 || skip "no $_t"
		done
		SLUICE_FW_HOST_NETNS=$(readlink /proc/self/ns/net) ||
		    skip "no netns"
		export SLUICE_FW_HOST_NETNS
		unshare -n true 2>/dev/null || skip "unshare -n not permitted"
		exec unshare -n "$0" --inside
	fi
	# --- inside the new namespace from here on
	here=$(readlink /proc/self/ns/net)
	if [ -z "$here" ] || [ -z "${SLUICE_FW_HOST_NETNS:-}" ] ||
	    [ "$here" = "$SLUICE_FW_HOST_NETNS" ]; then
		echo "$fw_name: still in the host namespace, refusing" >&2
		exit 1
	fi
}

# fw_cleanup: the exit trap: sluiced, then every process in $pids (all
# killed before any is waited for), the script's hook, its tables, $tmp.
# The namespaces go with their last process, the links with them.
fw_cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	for _p in $pids; do
		kill -KILL "$_p" 2>/dev/null
	done
	for _p in $pids; do
		wait "$_p" 2>/dev/null
	done
	command -v fw_cleanup_hook >/dev/null 2>&1 && fw_cleanup_hook
	for _t in $fw_tables; do
		nft delete table inet "$_t" 2>/dev/null
	done
	rm -rf "$tmp"
}

# fw_tmp: make $tmp and install the traps; call it before starting any
# process
fw_tmp() {
	tmp=$(mktemp -d) || exit 1
	trap fw_cleanup EXIT
	trap 'exit 1' INT TERM HUP
}

# fail MSG: exit 1, with sluiced's stderr and the script's own hook
fail() {
	echo "FAIL: $*" >&2
	[ -f "$tmp/err" ] && { echo "--- sluiced stderr:" >&2; cat "$tmp/err" >&2; }
	command -v fw_fail_hook >/dev/null 2>&1 && fw_fail_hook
	exit 1
}

# api ARGS...: curl on sluiced's control socket in $tmp/run
api() {
	curl -sf --max-time 5 --unix-socket "$tmp/run/control.sock" "$@"
}
health() {
	api http://sluice/v1/health
}
# fw_start FILE: start sluiced with FILE (stderr in $tmp/err), wait at
# most 10 s for /v1/health
fw_start() {
	"$sluiced" -c "$1" 2>"$tmp/err" &
	pid=$!
	_i=0
	until health >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null ||
		    { wait "$pid"; pid=; fail "sluiced exited at start"; }
		_i=$((_i + 1))
		[ $_i -gt 100 ] && fail "sluiced not ready after 10 s"
		sleep 0.1
	done
}

# wait_same FILE MSG: until the script's "same FILE" holds (its want and
# got in $tmp), at most 5 s, else fail MSG with their diff
wait_same() {
	_i=0
	until same "$1"; do
		_i=$((_i + 1))
		[ $_i -gt 50 ] && { diff -u "$tmp/want" "$tmp/got" >&2; fail "$2"; }
		sleep 0.1
	done
}

# newns VAR: a namespace held by a sleeping child (in $pids); VAR gets
# its pid.  Waits (at most 5 s) until the child is in a namespace that
# is not this one
newns() {
	unshare -n sleep 300 &
	_p=$!
	pids="$pids $_p"
	_i=0
	while [ "$(readlink /proc/$_p/ns/net 2>/dev/null)" = "$here" ] ||
	    [ -z "$(readlink /proc/$_p/ns/net 2>/dev/null)" ]; do
		_i=$((_i + 1)); [ $_i -gt 50 ] && fail "namespace $1"
		sleep 0.1
	done
	eval "$1=$_p"
}
# nsx NSPID CMD...: run CMD in that namespace
nsx() {
	_n=$1; shift
	nsenter -t "$_n" -n "$@"
}
# fw_routing: lo up, and skip unless veth pairs and forwarding (IPv4 and
# IPv6) are available: a kernel without veth, or a read-only /proc/sys,
# cannot run the routed tests
fw_routing() {
	ip link set lo up || skip "no lo"
	ip link add vprobe type veth peer name vprobep 2>/dev/null ||
	    skip "no veth"
	ip link del vprobe
	echo 1 2>/dev/null > /proc/sys/net/ipv4/ip_forward ||
	    skip "no ip_forward"
	echo 1 2>/dev/null > /proc/sys/net/ipv6/conf/all/forwarding ||
	    skip "no IPv6 forwarding"
}
# fw_veth NSPID DEV: a veth pair DEV (here) and eth0 (in NSPID, lo up)
fw_veth() {
	ip link add "$2" type veth peer name "$2p" || fail "veth $2"
	ip link set "$2p" netns "$1" || fail "move $2"
	nsx "$1" ip link set lo up
	nsx "$1" ip link set "$2p" name eth0
}
# tcp NSPID|- ADDR PORT [SRC]: the probe's verdict (open, timeout, ...)
tcp() {
	if [ "$1" = - ]; then
		shift; "$py" "$probe" tcp-probe 1 "$@"
	else
		_n=$1; shift; nsx "$_n" "$py" "$probe" tcp-probe 1 "$@"
	fi
}
# ctr CHAIN TEXT: packets of the first rule of CHAIN whose text has TEXT
ctr() {
	nft list chain inet sluice "$1" |
	    grep -F -- "$2 counter packets" | head -n 1 |
	    sed 's/.*counter packets \([0-9]*\) .*/\1/'
}
# listen NSPID|- ARGS...: a netprobe.py server (in $pids), once it says
# it is listening
listen() {
	_n=$1; shift
	mkfifo "$tmp/ready.$$" || fail mkfifo
	if [ "$_n" = - ]; then
		"$py" "$probe" "$@" > "$tmp/ready.$$" &
	else
		nsenter -t "$_n" -n "$py" "$probe" "$@" > "$tmp/ready.$$" &
	fi
	pids="$pids $!"
	read -r _l < "$tmp/ready.$$"
	rm -f "$tmp/ready.$$"
	[ "$_l" = listening ] || fail "listener $*"
}
