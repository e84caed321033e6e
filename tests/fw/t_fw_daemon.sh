#!/bin/sh
# t_fw_daemon.sh: the real sluiced applies its table at start, reports it
# in /v1/health, re-applies it on SIGHUP, keeps the old table and
# configuration when an apply fails, and leaves the table in place when
# killed; all inside a network namespace made for this test only.
#
# Outside: record the host namespace, re-exec under `unshare -n`.  Exit
# 77 (skip) when unshare is impossible, or 1 with SLUICE_TEST_STRICT=1.
# Inside: refuse to run if the namespace is the recorded host one.
set -u

. "$(dirname "$0")/lib.sh"
fw_netns "${1:-}" nft curl

# sluiced started as root runs its proxy as "nobody": the state file and
# the log live in $tmp, so that user owns it
id nobody >/dev/null 2>&1 || skip "no user nobody"
fw_tmp
holder=      # the nft -i holding an owner table, if running
fw_tables="sluice sluice2"
fw_cleanup_hook() {
	[ -n "$holder" ] && kill "$holder" 2>/dev/null && wait "$holder" 2>/dev/null
	exec 3>&- 2>/dev/null
}
chown nobody "$tmp" && chmod 755 "$tmp" || exit 1

# config FILE ENABLED TABLE DENY: a small configuration in $tmp
config() {
	cat > "$1" <<EOF
{
  "runtime_dir": "$tmp/run",
  "state_file": "$tmp/state.json",
  "user": "nobody",
  "log": { "path": "$tmp/conn.jsonl" },
  "deny_cidrs": [$4],
  "dns": { "servers": ["10.0.0.3"] },
  "firewall": { "enabled": $2, "table": "$3", "uid": 4243,
                "sandbox_subnets": ["10.77.0.0/16"],
                "broker_ports": [3128] }
}
EOF
}
# fwfield FIELD: the firewall object's FIELD from /v1/health ("null")
fwfield() {
	health | "$py" -c 'import json,sys
v = json.load(sys.stdin)["firewall"][sys.argv[1]]
print("null" if v is None else v)' "$1"
}
stop_kill() {
	kill -KILL "$pid" && wait "$pid" 2>/dev/null
	pid=
}
# same FILE: the kernel's table is what --print-firewall renders for FILE
same() {
	"$sluiced" --print-firewall -c "$1" > "$tmp/want" || fail "print $1"
	name=$(sed -n '1s/^table inet \([^ ]*\) {$/\1/p' "$tmp/want")
	nft list table inet "$name" > "$tmp/got" 2>/dev/null &&
	    cmp -s "$tmp/want" "$tmp/got"
}

# 1. disabled (the default): nothing is touched, health says so
config "$tmp/off.json" false sluice '"192.0.2.0/24"'
fw_start "$tmp/off.json"
[ "$(fwfield status)" = disabled ] || fail "disabled status: $(health)"
[ "$(fwfield table)" = "inet sluice" ] || fail "disabled table"
[ "$(fwfield applied_at)" = null ] || fail "disabled applied_at"
[ -z "$(nft list tables)" ] || fail "disabled sluiced made a table"
stop_kill

# 2. enabled: applied at start, before ready; nft agrees with
#    --print-firewall; health says applied
config "$tmp/a.json" true sluice '"192.0.2.0/24"'
fw_start "$tmp/a.json"
same "$tmp/a.json" || { diff -u "$tmp/want" "$tmp/got" >&2; fail "start table"; }
[ "$(fwfield status)" = applied ] || fail "status: $(health)"
[ "$(fwfield table)" = "inet sluice" ] || fail "table: $(health)"
fwfield applied_at | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$' ||
    fail "applied_at: $(health)"
[ "$(fwfield error)" = null ] || fail "error: $(health)"

# 3. SIGHUP with a new deny_cidr: the table is replaced and has it
config "$tmp/b.json" true sluice '"192.0.2.0/24", "198.51.100.0/24"'
cp "$tmp/b.json" "$tmp/a.json"
kill -HUP "$pid"
wait_same "$tmp/b.json" "reload table"
grep -q '198\.51\.100\.0/24' "$tmp/got" || fail "new deny_cidr missing"
[ "$(fwfield status)" = applied ] || fail "status after reload: $(health)"

# 4. a reload whose apply fails (another process owns a table of the
#    new name) keeps the running table and configuration: health says
#    failed with the reason, the old table is untouched
mkfifo "$tmp/fifo" || fail mkfifo
nft -i < "$tmp/fifo" >/dev/null 2>&1 &
holder=$!
exec 3>"$tmp/fifo"
echo 'add table inet sluice2 { flags owner; }' >&3
i=0
until nft list table inet sluice2 >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "owner table"; sleep 0.1
done
config "$tmp/a.json" true sluice2 '"203.0.113.0/24"'
kill -HUP "$pid"
i=0
until [ "$(fwfield status)" = failed ]; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "no failed status: $(health)"
	sleep 0.1
done
[ "$(fwfield table)" = "inet sluice" ] || fail "table after failure"
[ "$(fwfield error)" != null ] || fail "no error: $(health)"
grep -q "keeping the running configuration and firewall" "$tmp/err" ||
    fail "reason not logged"
same "$tmp/b.json" || { diff -u "$tmp/want" "$tmp/got" >&2; fail "old table"; }
exec 3>&-
wait "$holder" 2>/dev/null
holder=
# the owner table went with its socket; the same file now applies
i=0
while nft list table inet sluice2 >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "owner table stays"; sleep 0.1
done
kill -HUP "$pid"
i=0
until same "$tmp/a.json"; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "retried reload"; sleep 0.1
done
[ "$(fwfield status)" = applied ] || fail "status after retry: $(health)"
[ "$(fwfield table)" = "inet sluice2" ] || fail "table after retry"
nft list table inet sluice >/dev/null 2>&1 && fail "old-name table stays"

# 5. SIGKILL: the table outlives sluiced
stop_kill
same "$tmp/a.json" || fail "table gone after SIGKILL"

# 6. a start whose apply fails refuses to start, with a clear message
nft delete table inet sluice2 || fail "delete"
nft -i < "$tmp/fifo" >/dev/null 2>&1 &
holder=$!
exec 3>"$tmp/fifo"
echo 'add table inet sluice { flags owner; }' >&3
i=0
until nft list table inet sluice >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "owner table 2"; sleep 0.1
done
config "$tmp/c.json" true sluice '"192.0.2.0/24"'
"$sluiced" -c "$tmp/c.json" 2>"$tmp/err" && fail "started without firewall"
grep -q "will not start without its firewall" "$tmp/err" ||
    fail "start failure message"
[ -S "$tmp/run/control.sock" ] && health >/dev/null 2>&1 && fail "ready"
exec 3>&-
wait "$holder" 2>/dev/null
holder=
rm -f "$tmp/err"
echo "t_fw_daemon: ok"
