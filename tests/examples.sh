#!/bin/sh
# examples.sh: every configuration under examples/ passes
# `sluiced --check-config`, renders a firewall table with
# `sluiced --print-firewall` (no kernel needed), and appears unchanged in
# README.md and man/sluiced.json.5 where a marker names it:
#   README:  <!-- example: examples/NAME.json --> then a ```json block
#   man:     .\" example: examples/NAME.json      then .Bd -literal ... .Ed
# Each file must be shown in both.
set -u
src=${SLUICE_SRCDIR:-.}
bld=${SLUICE_BUILDDIR:-.}
sluiced=$bld/proxy/sluiced
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
rc=0
fail() { echo "FAIL: $*" >&2; rc=1; }

# block FILE MARKER OPEN CLOSE: the lines between the line after MARKER
# (which must be OPEN) and CLOSE
block() {
	# through the environment: awk -v would eat the backslash of .\"
	M=$2 O=$3 C=$4 awk '
	    BEGIN { m = ENVIRON["M"]; o = ENVIRON["O"]; c = ENVIRON["C"] }
	    st == 0 && $0 == m { st = 1; next }
	    st == 1 { if (index($0, o) != 1) exit 2; st = 2; next }
	    st == 2 && $0 == c { st = 3; exit 0 }
	    st == 2 { print }
	    END { if (st != 3) exit 3 }' "$1"
}

n=0
for f in "$src"/examples/*.json; do
	[ -f "$f" ] || continue
	n=$((n + 1))
	rel=examples/$(basename "$f")
	# the examples run their proxy as the default user "sluice"; where
	# this host has none, the check must say exactly that, and the same
	# file with an existing user must pass
	if getent passwd sluice >/dev/null; then
		"$sluiced" --check-config "$f" >/dev/null ||
		    fail "$rel: --check-config"
	else
		"$sluiced" --check-config "$f" >/dev/null 2>"$tmp/err" &&
		    fail "$rel: --check-config passed without user sluice"
		grep -q 'user: "sluice" does not exist' "$tmp/err" ||
		    fail "$rel: --check-config: $(cat "$tmp/err")"
		sed 's/^{/{ "user": "nobody",/' "$f" > "$tmp/user.json"
		"$sluiced" --check-config "$tmp/user.json" >/dev/null ||
		    fail "$rel: --check-config (user nobody)"
	fi
	"$sluiced" --print-firewall -c "$f" > "$tmp/nft" 2>"$tmp/err" ||
	    fail "$rel: --print-firewall: $(cat "$tmp/err")"
	if grep -q '"sandbox_subnets"' "$f"; then
		grep -q 'tcp dport @broker_ports counter' "$tmp/nft" ||
		    fail "$rel: no broker port rule"
		grep -q 'ip daddr @refused4 counter packets 0 bytes 0 drop' \
		    "$tmp/nft" || fail "$rel: no refused drop"
	fi
	if grep -q '"sandbox_interfaces"' "$f"; then
		grep -q 'iifname @sandbox_ifaces counter packets 0 bytes 0 drop' \
		    "$tmp/nft" || fail "$rel: no interface drop"
	fi
	block "$src/README.md" "<!-- example: $rel -->" '```json' '```' \
	    > "$tmp/readme" || fail "$rel: no block in README.md"
	cmp -s "$f" "$tmp/readme" || { diff -u "$f" "$tmp/readme" >&2;
	    fail "$rel: README.md differs"; }
	block "$src/man/sluiced.json.5" ".\\\" example: $rel" '.Bd -literal' \
	    '.Ed' > "$tmp/man" || fail "$rel: no block in sluiced.json.5"
	cmp -s "$f" "$tmp/man" || { diff -u "$f" "$tmp/man" >&2;
	    fail "$rel: sluiced.json.5 differs"; }
done
[ $n -ge 3 ] || fail "only $n examples"
[ $rc = 0 ] && echo "examples: $n ok"
exit $rc
