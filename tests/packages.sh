#!/bin/sh
# packages.sh (make check-packages; root, network to Debian's mirror):
# build the Debian packages from a clean copy of this tree with
# dpkg-buildpackage, check them with lintian, install them into a fresh
# Debian 12 root made with mmdebstrap, and check there that the user
# exists, the files are where the unit expects them, the default
# configuration passes --check-config, and sluiced started by hand in
# that root answers /v1/health.  Everything it makes is under one
# temporary directory, removed at exit; the root's sluiced is stopped by
# its pid.
set -eu
src=$(cd "${SLUICE_SRCDIR:-$(dirname "$0")/..}" && pwd)
keep=${SLUICE_KEEP:-0}
[ "$(id -u)" = 0 ] || { echo "packages.sh: needs root" >&2; exit 77; }
for t in dpkg-buildpackage lintian mmdebstrap git; do
	command -v $t >/dev/null || { echo "packages.sh: $t missing" >&2; exit 77; }
done
tmp=$(mktemp -d /var/tmp/sluice-pkg.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	mountpoint -q "$tmp/root/proc" 2>/dev/null && umount "$tmp/root/proc" || true
	[ "$keep" = 1 ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
t0=$(date +%s)

echo "== build (dpkg-buildpackage -b -us -uc)"
mkdir "$tmp/src"
(cd "$src" && git archive HEAD) | tar -x -C "$tmp/src"
(cd "$tmp/src" && dpkg-buildpackage -b -us -uc >"$tmp/build.log" 2>&1) || {
	tail -n 60 "$tmp/build.log"; exit 1; }
t1=$(date +%s)
ls "$tmp"/*.deb
echo "== lintian"
lintian --fail-on error --suppress-tags-from-file /dev/null \
    "$tmp"/*.changes | tee "$tmp/lintian.log" || {
	echo "lintian found errors"; exit 1; }

echo "== a fresh Debian 12 root (mmdebstrap)"
# the host's package sources (updates and security included), so that
# the root has the library versions the packages were built against
srcs=
[ -f /etc/apt/sources.list.d/debian.sources ] &&
    srcs=/etc/apt/sources.list.d/debian.sources
mmdebstrap --variant=apt --include=ca-certificates,systemd,curl \
    bookworm "$tmp/root" $srcs >"$tmp/mmdebstrap.log" 2>&1 || {
	tail -n 30 "$tmp/mmdebstrap.log"; exit 1; }
t2=$(date +%s)
mkdir -p "$tmp/root/tmp/debs"
cp "$tmp"/*.deb "$tmp/root/tmp/debs/"
mount -t proc proc "$tmp/root/proc"
chroot "$tmp/root" sh -c 'apt-get update -qq && apt-get install -y /tmp/debs/sluice_*.deb \
    /tmp/debs/sluice-executor_*.deb /tmp/debs/python3-sluice_*.deb' >"$tmp/install.log" 2>&1 || {
	tail -n 40 "$tmp/install.log"; exit 1; }

echo "== checks in the root"
fail=0
ck() { if "$@"; then echo "ok: $*"; else echo "FAIL: $*"; fail=1; fi; }
ck chroot "$tmp/root" getent passwd sluice
ck chroot "$tmp/root" getent group sluice
for f in /usr/sbin/sluiced /usr/bin/sluicectl /usr/bin/sluice-shim \
    /usr/lib/sluice/sluice-shim-static /usr/bin/sluice-run \
    /usr/sbin/sluice-execd /lib/systemd/system/sluice-execd.service \
    /etc/sluice/sluice-execd.json \
    /lib/systemd/system/sluiced.service /usr/lib/sysusers.d/sluice.conf \
    /usr/lib/tmpfiles.d/sluice.conf /etc/logrotate.d/sluice \
    /etc/sluice/sluiced.json /usr/share/man/man8/sluiced.8.gz; do
	ck test -e "$tmp/root$f"
done
ck grep -q '"ceiling": "off"' "$tmp/root/etc/sluice/sluiced.json"
ck chroot "$tmp/root" python3 -c 'import sluice; sluice.SandboxClient; sluice.webhook.verify'
ck chroot "$tmp/root" logrotate --debug /etc/logrotate.d/sluice
ck chroot "$tmp/root" systemd-analyze verify --man=no \
    /lib/systemd/system/sluiced.service
ck chroot "$tmp/root" sluiced --check-config /etc/sluice/sluiced.json
ck chroot "$tmp/root" systemd-analyze verify --man=no \
    /lib/systemd/system/sluice-execd.service
ck chroot "$tmp/root" sluice-execd --check-config -c /etc/sluice/sluice-execd.json
# the unit's ExecStart, by hand: no systemd runs in the root
chroot "$tmp/root" systemd-tmpfiles --create /usr/lib/tmpfiles.d/sluice.conf
chroot "$tmp/root" /usr/sbin/sluiced -c /etc/sluice/sluiced.json \
    >"$tmp/sluiced.log" 2>&1 &
pid=$!
i=0
until [ -S "$tmp/root/run/sluice/control.sock" ] || [ $i -ge 100 ]; do
	sleep 0.1; i=$((i + 1))
done
ck chroot "$tmp/root" sh -c 'sluicectl --socket /run/sluice/control.sock health | grep -q ok'
ck grep -q 'proxy process running as user sluice' "$tmp/sluiced.log"
kill "$pid"; wait "$pid" || true; pid=
t3=$(date +%s)
echo "packages: build $((t1 - t0)) s, root $((t2 - t1)) s, install and checks $((t3 - t2)) s"
[ $fail = 0 ] && echo "packages: ok"
exit $fail
