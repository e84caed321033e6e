#!/bin/sh
# t_fw_veth.sh: sluiced's firewall against real traffic over veth pairs,
# all inside network namespaces made for this test only.
#
#   broker (this script's own namespace, from `unshare -n`): sluiced with
#     the firewall on, listening on 10.88.0.1:3128; routes to the others
#   sbx1 10.88.0.2, sbx2 10.88.0.3: sandboxes in sandbox_subnets
#     10.88.0.0/24, each on a veth pair of its own, default route via the
#     broker (routed, so their traffic to each other crosses the broker's
#     forward hook)
#   lan 10.99.0.10 (private), 10.99.0.20 (the upstream, in allow_cidrs),
#     169.254.169.254 (metadata), 44.0.0.1-3 (public-looking addresses
#     for deny_cidrs): reached through the broker's routing table
#   IPv6 alongside: the broker fd88::1 (port 3128 too), the sandboxes
#     fd88::2 and fd88::3 in sandbox subnet fd88::/64, the lan fd99::10
#     (ULA), fd99::20 (the upstream, in allow_cidrs) and fd00:ec2::254
#     (AWS's metadata address), 2a00:44::9 (public-looking, like
#     44.0.0.9).  No static neighbour entries: the
#     sandboxes and the broker find each other by neighbour discovery
#     through the input guard (and by ARP for IPv4, which no inet hook
#     sees)
#
# The namespaces are held by `unshare -n sleep` children and entered with
# nsenter, so nothing is mounted under /run/netns; all of them end with
# this script's namespace.  Every probe has a short timeout and every
# loop a bound.
#
# Outside: record the host namespace, re-exec under `unshare -n`.  Exit
# 77 (skip) when that is impossible, or 1 with SLUICE_TEST_STRICT=1.
# Inside: refuse to run if the namespace is the recorded host one.
set -u

. "$(dirname "$0")/lib.sh"
fw_netns "${1:-}" nsenter setpriv ip nft curl "$py"

fw_tmp
fw_tables=sluice
fw_fail_hook() { nft list table inet sluice >&2 2>/dev/null; }
# nobody ADDR PORT: from the broker as uid/gid 65534 (not sluiced's
# uid), "open" if a TCP connection is made (with curl: python may live
# where that user cannot read it)
nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups \
	    curl -s --max-time 1 -o /dev/null "http://$1:$2/"
	case $? in
	7|28) echo closed ;;
	*) echo open ;;
	esac
}

# ---------------------------------------------------------------- net
newns S1
newns S2
newns LAN
fw_routing

# sandbox NSPID VETH ADDR: a routed veth to a sandbox
sandbox() {
	fw_veth "$1" "$2"
	ip addr add 10.88.0.1/32 dev "$2"
	ip link set "$2" up
	ip route add "$3/32" dev "$2" || fail "route $3"
	nsx "$1" ip addr add "$3/32" dev eth0
	nsx "$1" ip link set eth0 up
	nsx "$1" ip route add 10.88.0.1/32 dev eth0
	nsx "$1" ip route add default via 10.88.0.1 dev eth0 || fail "default $3"
	# IPv6 the same way (nodad: no duplicate detection to wait for)
	ip -6 addr add fd88::1/128 dev "$2" nodad
	ip -6 route add "$4/128" dev "$2" || fail "route $4"
	nsx "$1" ip -6 addr add "$4/128" dev eth0 nodad
	nsx "$1" ip -6 route add fd88::1/128 dev eth0
	nsx "$1" ip -6 route add default via fd88::1 dev eth0 ||
	    fail "default $4"
}
sandbox "$S1" vs1 10.88.0.2 fd88::2
sandbox "$S2" vs2 10.88.0.3 fd88::3

fw_veth "$LAN" vlan
ip addr add 10.99.0.1/24 dev vlan
ip link set vlan up
for a in 10.99.0.10/24 10.99.0.20/24 169.254.169.254/32 44.0.0.1/32 \
    44.0.0.2/32 44.0.0.3/32 44.0.0.9/32; do
	nsx "$LAN" ip addr add "$a" dev eth0 || fail "lan address $a"
done
ip -6 addr add fd99::1/64 dev vlan nodad || fail "broker lan IPv6"
for a in fd99::10/64 fd99::20/64 fd00:ec2::254/128 2a00:44::9/128; do
	nsx "$LAN" ip -6 addr add "$a" dev eth0 nodad ||
	    fail "lan address $a"
done
nsx "$LAN" ip link set eth0 up
nsx "$LAN" ip route add default via 10.99.0.1 || fail "lan default"
nsx "$LAN" ip -6 route add default via fd99::1 || fail "lan default v6"
ip route add 169.254.169.254/32 via 10.99.0.10 || fail "metadata route"
ip route add 44.0.0.0/24 via 10.99.0.10 || fail "44 route"
ip -6 route add fd00:ec2::254/128 via fd99::10 || fail "metadata route v6"
ip -6 route add 2a00:44::9/128 via fd99::10 || fail "2a00:44::9 route"

# ---------------------------------------------------------- listeners
echo "hello through sluice" > "$tmp/hello.txt"
listen "$LAN" http-serve 110 10.99.0.20:8080 "$tmp/hello.txt"
listen "$LAN" http-serve 110 '[fd99::20]:8080' "$tmp/hello.txt"
listen "$LAN" tcp-listen 110 10.99.0.10:80 169.254.169.254:80 \
    '[fd99::10]:80' '[fd00:ec2::254]:80'
listen "$S1" tcp-listen 110 10.88.0.2:80 '[fd88::2]:80'
listen "$S2" tcp-listen 110 10.88.0.3:80 '[fd88::3]:80'
listen - tcp-listen 110 10.88.0.1:8081 '[fd88::1]:8081'
i=0
until [ "$(tcp "$LAN" 10.99.0.20 8080)" = open ] &&
    [ "$(tcp "$LAN" fd99::20 8080)" = open ]; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "upstream not listening"; sleep 0.1
done

# ------------------------------------------------------------ sluiced
# config FILE DENY: sluiced's configuration with deny_cidrs DENY
config() {
	cat > "$1" <<EOF
{
  "user": "root",
  "runtime_dir": "$tmp/run",
  "state_file": "$tmp/state.json",
  "log": { "path": "$tmp/conn.jsonl" },
  "ceiling": "public",
  "listen": { "tcp": ["10.88.0.1:3128", "[fd88::1]:3128"] },
  "sessions": [
    { "id": "sbx1", "tier": "public", "source": "10.88.0.2" },
    { "id": "sbx2", "tier": "public", "source": "10.88.0.3" },
    { "id": "sbx1v6", "tier": "public", "source": "fd88::2" }
  ],
  "ports": { "public": [8080] },
  "allow_cidrs": ["10.99.0.20/32", "fd99::20/128"],
  "deny_cidrs": [$2],
  "dns": { "servers": ["127.0.0.1:53"],
           "hosts": { "upstream.test": ["10.99.0.20"],
                      "upstream6.test": ["fd99::20"] } },
  "firewall": { "enabled": true, "uid": 0,
                "sandbox_subnets": ["10.88.0.0/24", "fd88::/64"],
                "broker_ports": [3128] }
}
EOF
}
# the always-denied 44.0.0.1; 44.0.0.3 (A) or 44.0.0.2 (B) besides
config "$tmp/A.json" '"44.0.0.1/32", "44.0.0.3/32"'
config "$tmp/B.json" '"44.0.0.1/32", "44.0.0.2/32", "198.51.100.0/24"'
cp "$tmp/A.json" "$tmp/sluiced.json"
fw_start "$tmp/sluiced.json"
nft list table inet sluice >/dev/null || fail "no table"

# ------------------------------------------- (b) what a sandbox reaches
# the broker's port: a real request through sluiced to the upstream,
# whose reply comes back over the established connection (sluiced runs
# as the guarded uid: its answer to the sandbox's private address passes
# as established, its connection to the upstream through allow_cidrs)
o_est=$(ctr output 'ct state established,related')
o_allow=$(ctr output 'meta skuid 0 ip daddr @allow4')
got=$(nsx "$S1" curl -sS --max-time 5 -x http://10.88.0.1:3128 \
    http://upstream.test:8080/hello.txt) || fail "request through sluiced"
[ "$got" = "hello through sluice" ] || fail "proxied body: $got"
grep -q 'sbx1' "$tmp/conn.jsonl" || fail "no log record for sbx1"
[ "$(ctr input '@broker_ports')" -gt 0 ] || fail "broker port counter"
[ "$(ctr output 'ct state established,related')" -gt "$o_est" ] ||
    fail "established output counter"
[ "$(ctr output 'meta skuid 0 ip daddr @allow4')" -gt "$o_allow" ] ||
    fail "allow_cidrs output counter"

# controls: every listener is up and routed, seen from a place the
# firewall does not cover
[ "$(nobody 10.99.0.10 80)" = open ] ||
    fail "control: private listener"
[ "$(nobody 169.254.169.254 80)" = open ] ||
    fail "control: metadata listener"
[ "$(tcp "$LAN" 10.88.0.1 8081)" = open ] || fail "control: broker 8081"
# a connection into a sandbox from a public-looking address: the
# sandbox's replies pass the forward chain as established
f_est=$(ctr forward 'ip saddr @sandbox4 ct state established,related')
v=$(tcp "$LAN" 10.88.0.3 80 44.0.0.9); [ "$v" = open ] || fail "into sbx2: $v"
[ "$(tcp "$LAN" 10.88.0.2 80 44.0.0.9)" = open ] || fail "into sbx1"
[ "$(ctr forward 'ip saddr @sandbox4 ct state established,related')" \
    -gt "$f_est" ] || fail "established counter did not move"

# from the sandbox: the private address, the metadata address, the
# upstream itself (only through sluiced), the other sandbox and another
# port of the broker are all dropped (a timeout, not a refusal)
f_ref=$(ctr forward 'ip saddr @sandbox4 ip daddr @refused4')
f_sbx=$(ctr forward 'ip saddr @sandbox4 ip daddr @sandbox4')
i_drop=$(ctr input 'ip saddr @sandbox4')
for t in "10.99.0.10 80" "169.254.169.254 80" "10.99.0.20 8080" \
    "10.88.0.3 80" "10.88.0.1 8081" "10.88.0.1 22"; do
	# shellcheck disable=SC2086
	v=$(tcp "$S1" $t)
	[ "$v" = timeout ] || fail "sbx1 -> $t: $v, expected a drop"
done
[ "$(tcp "$S2" 10.88.0.2 80)" = timeout ] || fail "sbx2 -> sbx1"
[ "$(tcp "$S1" 10.88.0.1 3128)" = open ] || fail "sbx1 -> broker port"
# the dropping rules counted them (the SYN and its retries)
[ "$(ctr forward 'ip saddr @sandbox4 ip daddr @refused4')" -ge \
    $((f_ref + 3)) ] || fail "refused counter"
[ "$(ctr forward 'ip saddr @sandbox4 ip daddr @sandbox4')" -ge \
    $((f_sbx + 2)) ] || fail "other-sandbox counter"
[ "$(ctr input 'ip saddr @sandbox4')" -ge $((i_drop + 2)) ] ||
    fail "input drop counter"

# the self guard: a process with sluiced's uid (0 here: "user" is root so
# that the probes below can share the proxy's uid without a user of their
# own; t_fw_privsep covers the dropped proxy) cannot reach a
# refused class, while the allowed upstream and another uid can
o_ref=$(ctr output 'meta skuid 0 ip daddr @refused4')
v=$(tcp - 10.99.0.10 80)
case $v in timeout|"error EPERM") ;; *) fail "self guard: $v";; esac
v=$(tcp - 169.254.169.254 80)
case $v in timeout|"error EPERM") ;; *) fail "self guard metadata: $v";; esac
[ "$(ctr output 'meta skuid 0 ip daddr @refused4')" -ge $((o_ref + 2)) ] ||
    fail "self guard counter"
[ "$(tcp - 10.99.0.20 8080)" = open ] || fail "self guard: allow_cidrs"

# ----------------------------------------- (b6) the same over IPv6
# a request through sluiced's IPv6 listener to the upstream's IPv6
# address: the sandbox first resolves the broker (a neighbour
# solicitation from fd88::2, which the input guard accepts and counts)
i_ns=$(ctr input 'icmpv6 type nd-neighbor-solicit')
i_na=$(ctr input 'icmpv6 type nd-neighbor-advert')
port6='ip6 saddr @sandbox6 ip6 daddr @broker6 tcp dport @broker_ports'
i_port6=$(ctr input "$port6")
o_allow6=$(ctr output 'meta skuid 0 ip6 daddr @allow6')
got=$(nsx "$S1" curl -sS --max-time 5 -x 'http://[fd88::1]:3128' \
    http://upstream6.test:8080/hello.txt) || fail "v6 request through sluiced"
[ "$got" = "hello through sluice" ] || fail "v6 proxied body: $got"
grep -q '"session": *"sbx1v6"' "$tmp/conn.jsonl" ||
    fail "no log record for sbx1v6"
[ "$(ctr input "$port6")" -gt \
    "$i_port6" ] || fail "v6 broker port counter"
[ "$(ctr output 'meta skuid 0 ip6 daddr @allow6')" -gt "$o_allow6" ] ||
    fail "allow6 output counter"
[ "$(ctr input 'icmpv6 type nd-neighbor-solicit')" -gt "$i_ns" ] ||
    fail "no neighbour solicitation counted"
# the other way: the broker resolves a sandbox afresh; the sandbox's
# advertisement (from fd88::2) passes the input guard.  The probe from
# another uid is not answered (the SYN-ACK meets the input drop: the
# broker reaches no sandbox port), but the neighbour became reachable
ip -6 neigh flush dev vs1
[ "$(nobody '[fd88::2]' 80)" = closed ] || fail "broker -> sbx1 port 80"
ip -6 neigh show fd88::2 dev vs1 |
    grep -q 'lladdr .* \(REACHABLE\|STALE\|DELAY\|PROBE\)' ||
    fail "broker did not resolve fd88::2: $(ip -6 neigh show dev vs1)"
[ "$(ctr input 'icmpv6 type nd-neighbor-advert')" -gt "$i_na" ] ||
    fail "no neighbour advertisement counted"
# IPv4's counterpart needs no rule: ARP is not IP, no inet hook sees it
ip -4 neigh flush dev vs1
[ "$(nobody 10.88.0.2 80)" = closed ] || fail "broker -> sbx1 port 80 (v4)"
ip -4 neigh show 10.88.0.2 dev vs1 |
    grep -q 'lladdr .* \(REACHABLE\|STALE\|DELAY\|PROBE\)' ||
    fail "broker did not resolve 10.88.0.2: $(ip -4 neigh show dev vs1)"

# controls over IPv6, from the broker as another uid
for t in "[fd99::10] 80" "[fd00:ec2::254] 80"; do
	# shellcheck disable=SC2086
	[ "$(nobody $t)" = open ] || fail "control v6: $t"
done
[ "$(tcp "$LAN" fd88::1 8081)" = open ] || fail "control: [fd88::1]:8081"
# a connection into a sandbox from a public-looking address: the
# sandbox's replies pass the forward chain as established
f_est6=$(ctr forward 'ip6 saddr @sandbox6 ct state established,related')
[ "$(tcp "$LAN" fd88::3 80 2a00:44::9)" = open ] || fail "into sbx2 over v6"
[ "$(ctr forward 'ip6 saddr @sandbox6 ct state established,related')" \
    -gt "$f_est6" ] || fail "established v6 counter did not move"

# from the sandbox: the ULA address, the metadata address, the upstream
# itself, the other sandbox and another port of the broker are dropped
f_ref6=$(ctr forward 'ip6 saddr @sandbox6 ip6 daddr @refused6')
f_sbx6=$(ctr forward 'ip6 saddr @sandbox6 ip6 daddr @sandbox6')
i_drop6=$(ctr input 'ip6 saddr @sandbox6')
for t in "fd99::10 80" "fd00:ec2::254 80" "fd99::20 8080" "fd88::3 80" \
    "fd88::1 8081" "fd88::1 22"; do
	# shellcheck disable=SC2086
	v=$(tcp "$S1" $t)
	[ "$v" = timeout ] || fail "sbx1 -> $t: $v, expected a drop"
done
[ "$(tcp "$S2" fd88::2 80)" = timeout ] || fail "sbx2 -> sbx1 over v6"
[ "$(tcp "$S1" fd88::1 3128)" = open ] || fail "sbx1 -> broker port over v6"
[ "$(ctr forward 'ip6 saddr @sandbox6 ip6 daddr @refused6')" -ge \
    $((f_ref6 + 3)) ] || fail "refused6 counter"
[ "$(ctr forward 'ip6 saddr @sandbox6 ip6 daddr @sandbox6')" -ge \
    $((f_sbx6 + 2)) ] || fail "other-sandbox v6 counter"
[ "$(ctr input 'ip6 saddr @sandbox6')" -ge $((i_drop6 + 2)) ] ||
    fail "input drop v6 counter"

# ----------------------------------- (c) reloads swap the sets, no window
nsenter -t "$LAN" -n "$py" "$probe" udp-count 80 "$tmp/counts" \
    44.0.0.1:9999 44.0.0.2:9999 44.0.0.3:9999 &
pids="$pids $!"
i=0
until [ -s "$tmp/counts" ]; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "udp counter"; sleep 0.1
done
count() { sed -n "s/^$1 //p" "$tmp/counts"; }
# settle: wait for the counter to stop moving, then read N
settle() {
	_a=$(cat "$tmp/counts"); sleep 0.3; _i=0
	while [ "$_a" != "$(cat "$tmp/counts")" ]; do
		_i=$((_i + 1)); [ $_i -gt 30 ] && fail "counts do not settle"
		_a=$(cat "$tmp/counts"); sleep 0.3
	done
}
# holds TEXT: the kernel's refused4 set shows TEXT
holds() { nft list set inet sluice refused4 | grep -qF "$1"; }
# reload FILE WANT GONE: SIGHUP with FILE, wait until the kernel's set
# has WANT and not GONE
reload() {
	cp "$1" "$tmp/sluiced.json"
	kill -HUP "$pid"
	_i=0
	until holds "$2" && ! holds "$3"; do
		_i=$((_i + 1)); [ $_i -gt 100 ] && fail "reload to $1"
		sleep 0.05
	done
}

# before: under A, 44.0.0.2 passes, 44.0.0.1 and 44.0.0.3 do not
"$py" "$probe" udp-send 20 2 9999 44.0.0.1 44.0.0.2 44.0.0.3 > "$tmp/s0" ||
    fail "send"
settle
[ "$(count 44.0.0.1)" = 0 ] && [ "$(count 44.0.0.2)" = 20 ] &&
    [ "$(count 44.0.0.3)" = 0 ] || fail "before the loop: $(cat "$tmp/counts")"
f_ref=$(ctr forward 'ip saddr @sandbox4 ip daddr @refused4')
o_ref=$(ctr output 'meta skuid 0 ip daddr @refused4')

# the loop: 2000 rounds at 2 ms, from sluiced's uid (the self guard
# decides by the sets) and from the sandbox (the forward chain), while
# sluiced reloads six times between A and B
"$py" "$probe" udp-send 2000 2 9999 44.0.0.1 44.0.0.2 44.0.0.3 \
    > "$tmp/s1" 2>&1 &
sender=$!
pids="$pids $sender"
nsenter -t "$S1" -n "$py" "$probe" udp-send 2000 2 9999 44.0.0.1 > "$tmp/s2" 2>&1 &
sender2=$!
pids="$pids $sender2"
sleep 0.3
for n in 1 2 3; do
	reload "$tmp/B.json" 44.0.0.2 44.0.0.3
	sleep 0.3
	reload "$tmp/A.json" 44.0.0.3 44.0.0.2
	sleep 0.3
done
wait "$sender" || fail "sender: $(cat "$tmp/s1")"
wait "$sender2" || fail "sandbox sender: $(cat "$tmp/s2")"
settle
echo "t_fw_veth: loop: $(cat "$tmp/s1"); sandbox: $(cat "$tmp/s2");" \
    "arrived: $(tr '\n' ' ' < "$tmp/counts")" >&2
[ "$(count 44.0.0.1)" = 0 ] || fail "denied packets arrived: $(cat "$tmp/counts")"
# the loop did cross the reloads: both toggled addresses got through
# at some time, and the always-denied one was refused every round
[ "$(count 44.0.0.2)" -gt 20 ] && [ "$(count 44.0.0.3)" -gt 0 ] ||
    fail "loop did not run across the reloads: $(cat "$tmp/counts")"
grep -q 'refused [1-9]' "$tmp/s1" || fail "no refusals: $(cat "$tmp/s1")"
# the rules were refilled, not replaced: their counters kept counting
[ "$(ctr forward 'ip saddr @sandbox4 ip daddr @refused4')" -ge \
    $((f_ref + 2000)) ] || fail "forward counter reset or idle"
[ "$(ctr output 'meta skuid 0 ip daddr @refused4')" -ge $((o_ref + 2000)) ] ||
    fail "output counter reset or idle"
grep -q 'sets refilled' "$tmp/err" || fail "no refill logged"

# right after a reload: the newly denied address is blocked, the one
# taken out of deny_cidrs passes
c2=$(count 44.0.0.2); c3=$(count 44.0.0.3)
reload "$tmp/B.json" 44.0.0.2 44.0.0.3
"$py" "$probe" udp-send 50 2 9999 44.0.0.2 44.0.0.3 > "$tmp/s3" ||
    fail "send after reload"
settle
[ "$(count 44.0.0.2)" = "$c2" ] || fail "newly denied passed: $(cat "$tmp/counts")"
[ "$(count 44.0.0.3)" = $((c3 + 50)) ] ||
    fail "no longer denied blocked: $(cat "$tmp/counts")"
[ "$(count 44.0.0.1)" = 0 ] || fail "denied packets arrived at the end"
# and the proxy still works after all that
got=$(nsx "$S1" curl -sS --max-time 5 -x http://10.88.0.1:3128 \
    http://upstream.test:8080/hello.txt) || fail "request after reloads"
[ "$got" = "hello through sluice" ] || fail "proxied body after reloads"
kill -TERM "$pid" && wait "$pid"
pid=
rm -f "$tmp/err"
echo "t_fw_veth: ok"
