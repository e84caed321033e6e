#!/bin/sh
# t_fw_iface.sh: firewall.sandbox_interfaces against real traffic: a
# sandbox that sends from an address outside sandbox_subnets (its IPv6
# link-local address, or another IPv4 address it gave itself) is held by
# the interface it comes in on.  All inside namespaces made for it.
#
#   broker (this script's own namespace, from `unshare -n`): sluiced with
#     the firewall on, listening on 10.89.0.1:3128 and transparently on
#     10.89.0.1:3129; a listener of its own on every address for the
#     second broker port 3130 and for port 8081 (any other service of the
#     host); a second address 10.90.0.1 (on lo).  The broker ports are
#     admitted on sluiced's listening address 10.89.0.1 only
#   sbx1, on veth sbxa (broker side, guarded by "sbx*"): 10.89.0.2 in
#     sandbox subnet 10.89.0.0/24, and besides it 10.123.0.2 (outside
#     every subnet: a forged or self-assigned source) and fe80::2 (its
#     link-local address; the broker's side is fe80::1)
#   lan, on veth lana (not guarded): 44.0.0.9 (public-looking)
#
# Phase 1 runs with sandbox_subnets only and shows the hole (the other
# sources reach port 8081 and the lan); phase 2 reloads with
# sandbox_interfaces and shows it closed, while the broker's ports still
# answer from every source, the transparent redirect applies to the
# interface, and replies to connections from the lan still pass.
#
# Outside: record the host namespace, re-exec under `unshare -n`.  Exit
# 77 (skip) when that is impossible, or 1 with SLUICE_TEST_STRICT=1.
# Inside: refuse to run if the namespace is the recorded host one.
set -u

. "$(dirname "$0")/lib.sh"
fw_netns "${1:-}" nsenter ip nft curl "$py"

fw_tmp
fw_tables=sluice
fw_fail_hook() { nft list table inet sluice >&2 2>/dev/null; }

# ---------------------------------------------------------------- net
newns S1
newns LAN
fw_routing
ip addr add 10.90.0.1/32 dev lo || fail "second broker address"

# the sandbox: a routed veth, link-local addresses of our choosing
# (addrgenmode none, nodad: nothing to wait for)
fw_veth "$S1" sbxa
ip link set sbxa addrgenmode none 2>/dev/null
ip addr add 10.89.0.1/32 dev sbxa
ip -6 addr add fe80::1/64 dev sbxa nodad || fail "broker link-local"
ip link set sbxa up
ip route add 10.89.0.2/32 dev sbxa || fail "route sbx1"
# the broker answers the other source too (a sandbox that gave itself
# an address it may not use still gets its replies by the same wire)
ip route add 10.123.0.2/32 dev sbxa || fail "route other source"
nsx "$S1" ip link set eth0 addrgenmode none 2>/dev/null
nsx "$S1" ip addr add 10.89.0.2/32 dev eth0
nsx "$S1" ip addr add 10.123.0.2/32 dev eth0
nsx "$S1" ip -6 addr add fe80::2/64 dev eth0 nodad || fail "sbx link-local"
nsx "$S1" ip link set eth0 up
nsx "$S1" ip route add 10.89.0.1/32 dev eth0
nsx "$S1" ip route add default via 10.89.0.1 dev eth0 src 10.89.0.2 ||
    fail "sbx default"

fw_veth "$LAN" lana
ip addr add 10.99.0.1/24 dev lana
ip link set lana up
nsx "$LAN" ip addr add 10.99.0.10/24 dev eth0
nsx "$LAN" ip addr add 44.0.0.9/32 dev eth0
nsx "$LAN" ip link set eth0 up
nsx "$LAN" ip route add default via 10.99.0.1 || fail "lan default"
ip route add 44.0.0.9/32 via 10.99.0.10 || fail "44 route"

# the broker host: the second broker port and another service, on every
# address of both families
# (dual stack: IPv4 arrives v4-mapped)
listen - tcp-listen 60 '[::]:3130' '[::]:8081'
listen "$LAN" tcp-listen 60 44.0.0.9:8080 10.99.0.10:8080
listen "$S1" tcp-listen 60 10.89.0.2:80 10.123.0.2:80

# ------------------------------------------------------------ sluiced
# config FILE FIREWALL-EXTRA
config() {
	cat > "$1" <<EOF
{
  "user": "root",
  "runtime_dir": "$tmp/run",
  "state_file": "$tmp/state.json",
  "log": { "path": "$tmp/conn.jsonl" },
  "ceiling": "public",
  "listen": { "tcp": ["10.89.0.1:3128"], "transparent": ["10.89.0.1:3129"] },
  "sessions": [ { "id": "sbx1", "tier": "public", "source": "10.89.0.2" } ],
  "dns": { "servers": ["127.0.0.1:53"] },
  "firewall": { "enabled": true,
                "sandbox_subnets": ["10.89.0.0/24", "fd89::/64"],$2
                "broker_ports": [3128, 3130] }
}
EOF
}
config "$tmp/subnets.json" ""
config "$tmp/ifaces.json" '
                "sandbox_interfaces": ["sbx*", "tap0"],'
"$sluiced" --check-config "$tmp/ifaces.json" >/dev/null ||
    fail "check-config ifaces"
cp "$tmp/subnets.json" "$tmp/sluiced.json"
fw_start "$tmp/sluiced.json"
nft list table inet sluice >/dev/null || fail "no table"

# controls: the listeners are up, seen from places the guards do not
# cover
[ "$(tcp - 10.90.0.1 8081)" = open ] || fail "control: broker 8081"
[ "$(tcp "$LAN" 10.99.0.1 8081)" = open ] || fail "control: lan -> 8081"
[ "$(tcp - 44.0.0.9 8080)" = open ] || fail "control: lan listener"

# ------------------------------------ phase 1: subnets only, the hole
[ "$(tcp "$S1" 10.89.0.1 8081 10.89.0.2)" = timeout ] ||
    fail "subnet source reached 8081"
[ "$(tcp "$S1" 10.89.0.1 3130 10.89.0.2)" = open ] ||
    fail "subnet source: broker port"
# what the interface guard is for: other sources pass both guards
[ "$(tcp "$S1" 10.89.0.1 8081 10.123.0.2)" = open ] ||
    fail "phase 1: the other source should reach 8081 (the hole)"
[ "$(tcp "$S1" 'fe80::1%eth0' 8081)" = open ] ||
    fail "phase 1: link-local should reach 8081 (the hole)"
[ "$(tcp "$S1" 44.0.0.9 8080 10.123.0.2)" = open ] ||
    fail "phase 1: the other source should be forwarded (the hole)"
[ "$(tcp "$S1" 10.99.0.10 8080 10.123.0.2)" = open ] ||
    fail "phase 1: the other source should reach the lan (the hole)"

# ------------------------------- phase 2: sandbox_interfaces, closed
cp "$tmp/ifaces.json" "$tmp/sluiced.json"
kill -HUP "$pid"
i=0
until nft list set inet sluice sandbox_ifaces 2>/dev/null |
    grep -qF '"sbx*"'; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "reload to ifaces.json"
	sleep 0.05
done
# the interface set as nft prints it
nft list set inet sluice sandbox_ifaces | grep -qF \
    'elements = { "sbx*",' || fail "sandbox_ifaces elements"

bport='iifname @sandbox_ifaces ip daddr @broker4 tcp dport @broker_ports'
i_port=$(ctr input "$bport")
i_drop=$(ctr input 'iifname @sandbox_ifaces')
i_ns=$(ctr input 'iifname @sandbox_ifaces icmpv6 type nd-neighbor-solicit')
f_ref=$(ctr forward 'iifname @sandbox_ifaces ip daddr @refused4')
f_est=$(ctr forward 'iifname @sandbox_ifaces ct state established,related')
f_drop=$(ctr forward 'iifname @sandbox_ifaces')
# from the other IPv4 source and from the link-local address: another
# port of the broker, on its sandbox-facing address and on another of
# its addresses, is dropped, and so is a broker port on an address
# sluiced does not listen on; the broker's ports answer
for s in 10.123.0.2 10.89.0.2; do
	for t in "10.89.0.1 8081" "10.90.0.1 8081" "10.89.0.1 22" \
	    "10.90.0.1 3130"; do
		# shellcheck disable=SC2086
		v=$(tcp "$S1" $t $s)
		[ "$v" = timeout ] || fail "$s -> $t: $v, expected a drop"
	done
	[ "$(tcp "$S1" 10.89.0.1 3130 "$s")" = open ] ||
	    fail "$s -> broker port 3130"
	[ "$(tcp "$S1" 10.89.0.1 3128 "$s")" = open ] ||
	    fail "$s -> sluiced's port 3128"
done
# forget the neighbours: the sandbox resolves the broker afresh, from
# its link-local address
nsx "$S1" ip -6 neigh flush dev eth0
ip -6 neigh flush dev sbxa
v=$(tcp "$S1" 'fe80::1%eth0' 8081)
[ "$v" = timeout ] || fail "link-local -> 8081: $v, expected a drop"
v=$(tcp "$S1" 'fe80::1%eth0' 22)
[ "$v" = timeout ] || fail "link-local -> 22: $v, expected a drop"
# sluiced listens on no IPv6 address: no broker port over IPv6 either
v=$(tcp "$S1" 'fe80::1%eth0' 3130)
[ "$v" = timeout ] || fail "link-local -> 3130: $v, expected a drop"
# neighbour discovery from the link-local address went through the
# interface rules (the subnet rules know no fe80::)
[ "$(ctr input 'iifname @sandbox_ifaces icmpv6 type nd-neighbor-solicit')" \
    -gt "$i_ns" ] || fail "no neighbour solicitation counted"
# forwarding from the other source is dropped too, where the subnet
# rules do not look: to a public-looking and to a private address
[ "$(tcp "$S1" 44.0.0.9 8080 10.123.0.2)" = timeout ] ||
    fail "other source forwarded to the lan"
[ "$(tcp "$S1" 10.99.0.10 8080 10.123.0.2)" = timeout ] ||
    fail "other source forwarded to a private address"
[ "$(tcp "$S1" 44.0.0.9 8080 10.89.0.2)" = timeout ] ||
    fail "subnet source forwarded to the lan"
# the counters moved (at least one SYN for every probe: 4 from the
# other source, 3 from the link-local address, 1 to the lan, 1 to
# the private address)
[ "$(ctr input "$bport")" -gt "$i_port" ] ||
    fail "interface broker port counter"
[ "$(ctr input 'iifname @sandbox_ifaces')" -ge $((i_drop + 7)) ] ||
    fail "interface input drop counter"
[ "$(ctr forward 'iifname @sandbox_ifaces ip daddr @refused4')" -ge \
    $((f_ref + 1)) ] || fail "interface refused counter"
[ "$(ctr forward 'iifname @sandbox_ifaces')" -ge $((f_drop + 1)) ] ||
    fail "interface forward drop counter"

# replies to a connection from the lan into the sandbox still pass as
# established: from its subnet address (the subnet rule) and from the
# other one (the interface rule)
[ "$(tcp "$LAN" 10.89.0.2 80 44.0.0.9)" = open ] ||
    fail "lan -> sandbox: the replies should pass"
[ "$(tcp "$LAN" 10.123.0.2 80 44.0.0.9)" = open ] ||
    fail "lan -> sandbox's other address: the replies should pass"
[ "$(ctr forward 'iifname @sandbox_ifaces ct state established,related')" \
    -gt "$f_est" ] || fail "interface established counter"

# transparent mode: web traffic from the interface is redirected to
# sluiced's transparent port, whatever the source address
# (the connection is sluiced's now: it opens, where port 8080 did not)
r=$(ctr prerouting 'iifname @sandbox_ifaces tcp dport @redirect_ports')
v=$(tcp "$S1" 44.0.0.9 80 10.123.0.2)
[ "$v" = open ] || fail "redirect from the other source: $v"
[ "$(ctr prerouting 'iifname @sandbox_ifaces tcp dport @redirect_ports')" \
    -gt "$r" ] || fail "the interface's redirect did not count"

# --print-firewall is what the kernel holds (counters aside)
"$sluiced" --print-firewall -c "$tmp/ifaces.json" > "$tmp/want" ||
    fail "--print-firewall"
nft list table inet sluice |
    sed 's/counter packets [0-9]* bytes [0-9]*/counter packets 0 bytes 0/' \
    > "$tmp/got" || fail "nft list"
diff -u "$tmp/want" "$tmp/got" || fail "print differs from the kernel"

kill -TERM "$pid" && wait "$pid"
pid=
rm -f "$tmp/err"
echo "t_fw_iface: ok"
