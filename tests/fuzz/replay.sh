#!/bin/sh
# Replays every seed corpus through its harness (non-fuzz builds).
set -u
b=${SLUICE_BUILDDIR:-.}
s=${SLUICE_SRCDIR:-.}
rc=0
for h in http target sni config fwmsg runcfg api state execapi gate tlsca osmp ospolicy osport rules rulebody creds s3 agent ws; do
	d="$s/tests/fuzz/corpus/$h"
	[ -d "$d" ] || { echo "no corpus for $h"; rc=1; continue; }
	n=$(ls "$d" | wc -l)
	if "$b/tests/fuzz/fuzz_$h" "$d"/*; then
		echo "fuzz_$h: $n seeds ok"
	else
		echo "fuzz_$h: FAILED"; rc=1
	fi
done
exit $rc
