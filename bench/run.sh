#!/bin/sh
# bench/run.sh: sluiced against tinyproxy, squid, Apache Traffic Server
# and a direct connection, on loopback only, in one run of under ~10
# minutes (--scale adds the scale figures, a few minutes more).
#
#   bench/run.sh [--reps N] [--duration S] [--targets direct,sluiced,...]
#                [--perf] [--scale] [--keep-tmp]
#   bench/run.sh --executor [--backends ns,gvisor] [--strace]
#                [--opensandbox] [--archive] [...]
#   bench/run.sh --inspect [--reps N] [--requests N] [--conns N]
#
# --inspect runs the TLS inspection figures instead (bench/inspect.py:
# one sluiced and an nginx HTTPS origin, an opaque tunnel against an
# inspected one: the median added per keep-alive request, the cost of a
# new inspected connection, sluiced's CPU per request); it needs nginx
# and none of the peers.
#
# --executor runs the executor figures instead (bench/exec.py, as root:
# sandbox create, exec round trip, 1 MiB PUT and GET through
# sluice-execd's API on the ns backend and gVisor); it needs none of the
# peers and builds sluiced, sluice-execd and sluice-shim.
#
# Installs what it lacks (Debian packages tinyproxy, squid, trafficserver,
# nginx), builds sluiced, bench/loadgen and bench/bench_policy, then hands
# over to bench/bench.py, which starts every daemon itself in the
# foreground with its own config (ATS: its whole runroot) and pid file in
# a temp dir and stops it by its PID.
# System services are never touched.  The table is printed and written to
# bench/results.md (markdown, for README) and bench/results.json.
#
# Environment: SLUICE_BUILDDIR (default: the source tree) is where the
# tree is configured and built; BENCH_OUTDIR (default: bench/ in the
# source tree) receives the results.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=${SLUICE_BUILDDIR:-$src}
outdir=${BENCH_OUTDIR:-$here}

build_tree() {
	if [ ! -f "$build/Makefile" ]; then
		if [ ! -x "$src/configure" ]; then
			(cd "$src" && autoreconf -fi)
		fi
		(cd "$build" && "$src/configure" >/dev/null)
	fi
}

if [ "${1:-}" = --inspect ]; then
	shift
	if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "bench: missing nginx; run as root or install it" >&2
			exit 1
		fi
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		    nginx-light >/dev/null
	fi
	PATH=$PATH:/usr/sbin:/sbin
	export PATH
	build_tree
	make -C "$build" -j2 proxy/sluiced >/dev/null
	exec python3 "$here/inspect.py" --sluiced "$build/proxy/sluiced" \
	    --outdir "$outdir" "$@"
fi

if [ "${1:-}" = --executor ]; then
	shift
	build_tree
	make -C "$build" -j2 proxy/sluiced \
	    sandbox-glue/executor/execd/sluice-execd \
	    sandbox-glue/shim/sluice-shim >/dev/null
	exec python3 "$here/exec.py" --builddir "$build" --outdir "$outdir" "$@"
fi

need=""
for pair in tinyproxy:tinyproxy squid:squid traffic_server:trafficserver \
    nginx:nginx taskset:util-linux python3:python3; do
	cmd=${pair%%:*}
	pkg=${pair#*:}
	# squid and nginx live in sbin, which a plain PATH may lack
	if ! command -v "$cmd" >/dev/null 2>&1 &&
	    [ ! -x "/usr/sbin/$cmd" ]; then
		need="$need $pkg"
	fi
done
if [ -n "$need" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench: missing$need; run as root or install them" >&2
		exit 1
	fi
	echo "bench: installing$need" >&2
	# policy-rc.d in containers keeps the packages' services from
	# starting; the bench never uses them either way
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi
PATH=$PATH:/usr/sbin:/sbin
export PATH

# build: the bench's own programs must build; sluiced may still be
# unfinished, and then its column says so
build_tree
make -C "$build" -j2 bench/loadgen bench/bench_policy >/dev/null
if ! make -C "$build" -j2 proxy/sluiced >/dev/null 2>&1; then
	echo "bench: sluiced did not build; it will be skipped" >&2
fi

# 2,000 idle tunnels (10,000 with --scale): the proxy holds two
# descriptors a tunnel, nginx and the load generator one each
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 65536 ]; then
	ulimit -Hn 65536 2>/dev/null || true
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 20000 2>/dev/null || true

if [ "$(nproc)" -lt 2 ]; then
	echo "bench: needs 2 cores (proxy on 0, origin and load on 1)" >&2
	exit 1
fi

exec python3 "$here/bench.py" \
	--loadgen "$build/bench/loadgen" \
	--sluiced "$build/proxy/sluiced" \
	--bench-policy "$build/bench/bench_policy" \
	--outdir "$outdir" "$@"
