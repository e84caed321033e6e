#!/bin/sh
# README's first command ends in demo/demo.sh: run it with --yes and check
# that the app's half (on the Python SDK, as nobody) did each step.
# Skips (77) without root or user namespaces; fails then under
# SLUICE_TEST_STRICT=1.
set -u
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${SLUICE_BUILDDIR:-$src}
skip() {
	echo "SKIP: t_demo: $*"
	[ "${SLUICE_TEST_STRICT-}" = 1 ] && { echo "# strict: a skip fails"; exit 1; }
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root"
unshare -U -m -p -n -f true 2>/dev/null || skip "no user namespaces"
# the demo makes its directory in ours; every process it starts carries
# the marker execdlib.py looks for
dir=$(mktemp -d /tmp/sluice-t_demo.XXXXXX)
chmod 711 "$dir"
out=$dir/out
trap 'rm -rf --one-file-system "$dir"' EXIT
TMPDIR=$dir SLUICE_TEST_OWNER=$dir \
SLUICED=$build/proxy/sluiced SLUICECTL=$build/proxy/sluicectl/sluicectl \
SLUICE_EXECD=$build/sandbox-glue/executor/execd/sluice-execd \
SLUICE_SHIM=$build/sandbox-glue/shim/sluice-shim \
	timeout 300 sh "$src/demo/demo.sh" --yes </dev/null >"$out" 2>&1
rc=$?
cat "$out"
fail=0
# nothing of the demo's sandboxes may be left (processes, mounts, loop
# devices, groups named for them): what is, is named, taken down, and
# fails the test
tmp=$(sed -n 's|.*sluiced -c \(/[^ ]*\)/sluiced.json.*|\1|p' "$out" | head -1)
if ! SLUICE_BUILDDIR=$build "${PYTHON3:-python3}" \
    "$src/tests/scenario/execdlib.py" check --root "$dir" \
    ${tmp:+--state "$tmp/xstate"}; then
	echo "the demo left something behind"
	fail=1
fi
want() {
	if grep -q -- "$1" "$out"; then echo "ok: $1"; else echo "missing: $1"; fail=1; fi
}
[ $rc = 0 ] || { echo "demo exited $rc"; fail=1; }
want "the app (uid 65534) creates a sandbox for chat demo-chat"
want "demo-chat: running on ns, tier registries, broker session ok"
want "Successfully installed sluicedemo-1.0"
want "sluicedemo.VALUE = 42"
want "wants GET example.com:"
want "answered: allow_once"
want "curl exited 0, HTTP 200"
want "fetched: hello from example.com"
want "gone: \[\]"
want "prompt_answer .* allow_once"
want "chain intact"
if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
