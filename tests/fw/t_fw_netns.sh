#!/bin/sh
# t_fw_netns.sh: apply, read back, replace and remove sluice's table with
# the real kernel, inside a network namespace made for this test only.
#
# Outside: record the host namespace, re-exec under `unshare -n`.  Exit
# 77 (skip) when unshare is impossible, or 1 with SLUICE_TEST_STRICT=1.
# Inside: refuse to run if the namespace is the recorded host one.
set -u
. "$(dirname "$0")/lib.sh"
tool=$bld/tests/fw/fw_tool
fw_netns "${1:-}" nft
fw_tmp
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. apply (the tool reads back and compares), then nft agrees with the
#    golden text, which is also what --print-firewall renders
"$tool" apply "$src/tests/fw/full.json" || fail "apply full"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$src/tests/fw/golden/full.nft" "$tmp/got" || fail "full dump"
# nothing but our table exists in the namespace
[ "$(nft list tables)" = "table inet sluice" ] || fail "other tables"

# 2. a change behind our back is noticed by the read back
nft add element inet sluice allow4 '{ 192.0.2.1 }' || fail "tamper"
"$tool" verify "$src/tests/fw/full.json" 2>"$tmp/err" && fail "tamper unseen"
grep -q "set allow4" "$tmp/err" || fail "tamper message: $(cat "$tmp/err")"

# 2b. a change of set elements only refills the changed sets in one
#     batch (the tampered allow4 is flushed with the rest); a rule added
#     behind our back makes the refill's read back fail, and the update
#     falls back to the whole-table replace
[ "$("$tool" update "$src/tests/fw/full.json" "$src/tests/fw/update.json")" \
    = refilled ] || fail "refill"
"$sluiced" --print-firewall -c "$src/tests/fw/update.json" > "$tmp/want" ||
    fail "print update"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$tmp/want" "$tmp/got" || fail "refilled dump"
nft add rule inet sluice input counter || fail "add rule"
[ "$("$tool" update "$src/tests/fw/update.json" "$src/tests/fw/full.json")" \
    = replaced ] || fail "fallback replace"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$src/tests/fw/golden/full.nft" "$tmp/got" || fail "fallback dump"

# 2c. a long deny list goes to the kernel in several NEWSETELEM messages
#     of one refill batch, and comes back whole; and back again
"${PYTHON3:-python3}" - "$src/tests/fw/update.json" "$tmp/long.json" <<'PY' ||
import json, sys
c = json.load(open(sys.argv[1]))
# every other address from 44.0.0.0: 6000 ranges that cannot merge
c["deny_cidrs"] = ["44.%d.%d.%d" % (i // 32768, i // 128 % 256, i % 128 * 2)
                   for i in range(6000)]
json.dump(c, open(sys.argv[2], "w"))
PY
    fail "long.json"
"$tool" apply "$src/tests/fw/update.json" || fail "apply update"
[ "$("$tool" update "$src/tests/fw/update.json" "$tmp/long.json")" \
    = refilled ] || fail "long refill"
n=$(nft list set inet sluice refused4 | grep -o '44\.[0-9.]*' | wc -l)
[ "$n" -eq 6000 ] || fail "long refill: $n of 6000 in the kernel"
[ "$("$tool" update "$tmp/long.json" "$src/tests/fw/update.json")" \
    = refilled ] || fail "long refill back"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$tmp/want" "$tmp/got" || fail "refilled back dump"
"$tool" apply "$src/tests/fw/full.json" || fail "apply full again"

# 2d. the interface guard: its ifname interval set (names, "name*"
#     prefixes, two that touch) as nft lists it, then a changed interface
#     list (and a moved listener: the broker addresses) is a refill
"$tool" apply "$src/tests/fw/iface.json" || fail "apply iface"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$src/tests/fw/golden/iface.nft" "$tmp/got" || fail "iface dump"
sed 's/"tap0", "br-sandbox", /"tap9", /; s/"\[::\]:3129"/"10.200.0.9:3129"/' \
    "$src/tests/fw/iface.json" > "$tmp/iface2.json"
[ "$("$tool" update "$src/tests/fw/iface.json" "$tmp/iface2.json")" \
    = refilled ] || fail "iface refill"
"$sluiced" --print-firewall -c "$tmp/iface2.json" > "$tmp/want" ||
    fail "print iface2"
grep -q '"tap9",' "$tmp/want" || fail "iface2 text"
grep -q 'elements = { 10.200.0.1, 10.200.0.9 }' "$tmp/want" ||
    fail "iface2 broker addresses"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$tmp/want" "$tmp/got" || fail "iface refilled dump"
"$tool" apply "$src/tests/fw/full.json" || fail "apply full after iface"

# 3. atomic replace with a changed configuration: same table, new sets
#    and rules, counters reset, the tampered element gone
"$tool" apply "$src/tests/fw/changed.json" || fail "apply changed"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$src/tests/fw/golden/changed.nft" "$tmp/got" || fail "changed dump"
"$tool" verify "$src/tests/fw/full.json" 2>/dev/null && fail "old verified"

# 4. a second table of a different name lives beside it, untouched
"$tool" apply "$src/tests/fw/self.json" || fail "apply self"
nft list table inet sluice_self > "$tmp/got" || fail "nft list self"
diff -u "$src/tests/fw/golden/self.nft" "$tmp/got" || fail "self dump"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$src/tests/fw/golden/changed.nft" "$tmp/got" || fail "neighbour"

# 5. an extra chain in our table is noticed; a re-apply repairs it
nft add chain inet sluice extra || fail "add chain"
"$tool" verify "$src/tests/fw/changed.json" 2>"$tmp/err" && fail "extra unseen"
grep -q "holds" "$tmp/err" || fail "extra message: $(cat "$tmp/err")"
"$tool" apply "$src/tests/fw/changed.json" || fail "repair"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$src/tests/fw/golden/changed.nft" "$tmp/got" || fail "repaired dump"

# 6. sluiced prints the same text and removes the table, twice; the
#    other table stays until removed too
"$sluiced" --print-firewall -c "$src/tests/fw/changed.json" > "$tmp/got" ||
    fail "--print-firewall"
diff -u "$src/tests/fw/golden/changed.nft" "$tmp/got" || fail "print"
"$sluiced" --remove-firewall -c "$src/tests/fw/changed.json" || fail "remove"
"$tool" remove "$src/tests/fw/changed.json" || fail "remove again"
[ "$(nft list tables)" = "table inet sluice_self" ] || fail "after remove"
"$tool" remove "$src/tests/fw/self.json" || fail "remove self"
[ -z "$(nft list ruleset)" ] || fail "ruleset not empty"
echo "t_fw_netns: ok"
