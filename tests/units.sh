#!/bin/sh
# units.sh: the systemd unit as systemd reads it (systemd-analyze
# verify, no running systemd needed), its exposure (systemd-analyze
# security --offline), the sysusers.d and tmpfiles.d entries applied to
# a scratch root, and the default configuration through --check-config.
set -u
src=${SLUICE_SRCDIR:-.}
bld=${SLUICE_BUILDDIR:-.}
skip() {
	echo "SKIP: $*"
	[ "${SLUICE_TEST_STRICT:-0}" = 1 ] && exit 1
	exit 77
}
command -v systemd-analyze >/dev/null || skip "systemd-analyze missing (apt-get install systemd)"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
rc=0
fail() { echo "FAIL: $*" >&2; rc=1; }

# the unit with its paths in this build: verify checks that they exist
mkdir -p "$tmp/etc/sluice" "$tmp/units"
cp "$src/packaging/sluiced.json" "$tmp/etc/sluice/sluiced.json"
sed -e "s|@sbindir@|$bld/proxy|g" -e "s|@bindir@|$bld/proxy/sluicectl|g" \
    -e "s|@sysconfdir@|$tmp/etc|g" "$src/packaging/sluiced.service.in" \
    > "$tmp/units/sluiced.service"
# sluice-execd.service is ordered after this one; verify wants to find it
cp "$src/packaging/sluice-execd.json" "$tmp/etc/sluice/sluice-execd.json"
sed -e "s|@sbindir@|$bld/sandbox-glue/executor/execd|g" \
    -e "s|@sysconfdir@|$tmp/etc|g" "$src/packaging/sluice-execd.service.in" \
    > "$tmp/units/sluice-execd.service"
for u in sluiced sluice-execd; do
	if systemd-analyze verify --man=no "$tmp/units/$u.service" \
	    >"$tmp/verify" 2>&1; then
		:
	else
		cat "$tmp/verify" >&2
		fail "systemd-analyze verify $u.service"
	fi
	# anything verify says about our units is a finding, even with exit 0
	if grep -q -e 'sluiced.service' -e 'sluice-execd.service' "$tmp/verify"; then
		cat "$tmp/verify" >&2
		fail "systemd-analyze verify $u.service printed warnings"
	fi
done
if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
	systemd-analyze security --offline=true --no-pager \
	    "$tmp/units/sluiced.service" >"$tmp/security" 2>&1 ||
	    true   # exits non-zero above a threshold; the score is reported
	score=$(grep -o 'Overall exposure level for sluiced.service: .*' \
	    "$tmp/security")
	[ -n "$score" ] || { cat "$tmp/security" >&2; fail "no exposure score"; }
	echo "units: $score"
	systemd-analyze security --offline=true --no-pager \
	    "$tmp/units/sluice-execd.service" 2>&1 |
	    grep -o 'Overall exposure level for sluice-execd.service: .*' || true
fi

# sysusers.d and tmpfiles.d into a scratch root
mkdir -p "$tmp/root/etc"
systemd-sysusers --root="$tmp/root" "$src/packaging/sluice.sysusers" ||
    fail "systemd-sysusers"
grep -q '^sluice:x:[0-9]*:[0-9]*:.*:/nonexistent:/usr/sbin/nologin$' \
    "$tmp/root/etc/passwd" || fail "no sluice user: $(cat "$tmp/root/etc/passwd")"
grep -q '^sluice:x:' "$tmp/root/etc/group" || fail "no sluice group"
systemd-tmpfiles --root="$tmp/root" --create "$src/packaging/sluice.tmpfiles" ||
    fail "systemd-tmpfiles"
for d in run/sluice var/lib/sluice var/log/sluice; do
	[ -d "$tmp/root/$d" ] || fail "tmpfiles made no /$d"
done

# the default configuration: ceiling off, and valid
grep -q '"ceiling": "off"' "$src/packaging/sluiced.json" ||
    fail "the default ceiling is not off"
sed 's/"user": "sluice"/"user": "nobody"/' "$src/packaging/sluiced.json" \
    > "$tmp/default.json"
"$bld/proxy/sluiced" --check-config "$tmp/default.json" >/dev/null ||
    fail "default configuration: --check-config"
"$bld/sandbox-glue/executor/execd/sluice-execd" --check-config \
    -c "$src/packaging/sluice-execd.json" >/dev/null ||
    fail "the executor's default configuration: --check-config"
[ $rc = 0 ] && echo "units: ok"
exit $rc
