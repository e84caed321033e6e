#!/bin/sh
# Lints every manual page with mandoc(1) and fails on any message of
# level warning or above.  Without mandoc the test is skipped (77), unless
# SLUICE_TEST_STRICT=1 asks for every test to really run.
#
# Usage: man-lint.sh [page ...]   (default: every page under man/)
set -u
s=${SLUICE_SRCDIR:-.}

if ! command -v mandoc >/dev/null 2>&1; then
	if [ "${SLUICE_TEST_STRICT:-0}" = 1 ]; then
		echo "man-lint: mandoc not found and SLUICE_TEST_STRICT=1" >&2
		exit 1
	fi
	echo "man-lint: mandoc not found: skipped (apt-get install mandoc)"
	exit 77
fi

if [ $# -eq 0 ]; then
	for f in "$s"/man/*.[1-9]; do
		[ -f "$f" ] && set -- "$@" "$f"
	done
fi
if [ $# -eq 0 ]; then
	echo "man-lint: no manual pages under $s/man" >&2
	exit 1
fi

rc=0
for f in "$@"; do
	# mandoc's exit status alone misses nothing at this level, but the
	# output is what a person needs to fix the page
	out=$(mandoc -Tlint -W warning "$f" 2>&1)
	st=$?
	if [ $st -ne 0 ] || [ -n "$out" ]; then
		printf '%s\n' "$out"
		echo "man-lint: $f: FAILED (mandoc exit $st)"
		rc=1
	else
		echo "man-lint: $f: ok"
	fi
done
exit $rc
