#!/bin/bash
# layering.sh: keeps the layers of DESIGN.md (section Layout) kept.  Reads
# the sources (includes) and the built object files (nm) and fails on:
#
#  (a) a private header (*-int.h) included from outside its own folder,
#      except the white-box tests listed in ALLOW_INT below;
#  (b) a quoted #include not written from the top of the tree: it must
#      name a path that exists from the top ("policy/policy.h"), with no
#      ./ or ../.  Same-folder private headers too ("firewall/fw-int.h").
#      The one exception is the generated "sluice-config.h";
#  (c) an object in proxy/relay/ that references a symbol defined in
#      proxy/control/;
#  (d) an object in firewall/ or policy/ that references a symbol defined
#      anywhere in proxy/; one in proxy/lib/ that references proxy/relay/,
#      proxy/control/ or proxy/'s top; and, DESIGN's "libc only", one in
#      policy/, sandbox-glue/agent/ or sandbox-glue/shim/ that references
#      any other folder (the shim may use the agent, built into it).
#      The same folder rules apply to includes ("firewall/x.c" including
#      "proxy/config.h" breaks (d) as a call would);
#  (e) a cycle in the link-level graph between translation units (an edge
#      A -> B for each undefined symbol of A defined by B; strongly
#      connected components by Tarjan) with a member outside proxy/relay/
#      (so no cycle crosses the executor's folders either);
#  (f) the executor's layers, one a folder under sandbox-glue/executor/
#      (EXEC_USES below): a folder that references or includes a product
#      folder that is neither itself nor one it may use (backend/ never
#      image/, execd/ or cli/; cli/ never execd/; ...), and a product
#      source left directly in sandbox-glue/executor/.
#
# Objects: every *.o under proxy/ policy/ firewall/ sandbox-glue/ of the
# build directory, named the automake way (proxy/sluiced-main.o,
# proxy/lib/libpx_a-http.o, policy/addr.o).  Objects built for tests or
# benchmarks (tests_*-, bench_*-) are left out; objects of one source
# compiled for several targets are one node; an object whose source is
# gone or that the build's Makefile no longer names (left over from a
# move) is left out and named.
#
# Usage: layering.sh             self-test, then the check of this build
#        layering.sh --selftest  only the self-test (a fixture of its own)
#        layering.sh --check [--srcdir DIR] [--builddir DIR]
# DIRs default to $SLUICE_SRCDIR / $SLUICE_BUILDDIR (set by make check),
# else the top of the tree this script sits in and the current directory.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${SLUICE_SRCDIR:-$(dirname "$here")}
bld=${SLUICE_BUILDDIR:-.}
py=${PYTHON3:-python3}
mode=all

# White-box tests that may include a module's private header:
# "including file:header", both from the top of the tree.  Only files
# under tests/unit/ and tests/fuzz/ may be listed.
ALLOW_INT=(
	"tests/unit/firewall/test_fw.c:firewall/fw-int.h"
	"tests/unit/proxy/lib/test_config.c:proxy/lib/config-int.h"
	"tests/fuzz/fuzz_execapi.c:sandbox-glue/executor/execd/execd-int.h"
	"tests/fuzz/fuzz_gate.c:sandbox-glue/executor/execd/execd-int.h"
	"tests/fuzz/fuzz_s3.c:sandbox-glue/executor/execd/execd-int.h"
	"tests/fuzz/fuzz_osmp.c:sandbox-glue/executor/execd/exec_os-int.h"
	"tests/fuzz/fuzz_osmp.c:sandbox-glue/executor/execd/execd-int.h"
	"tests/fuzz/fuzz_ospolicy.c:sandbox-glue/executor/execd/exec_os-int.h"
	"tests/fuzz/fuzz_osport.c:sandbox-glue/executor/execd/exec_os-int.h"
	"tests/fuzz/fuzz_api.c:proxy/control/control-int.h"
	"tests/unit/sandbox-glue/executor/execd/test_execd.c:sandbox-glue/executor/execd/execd-int.h"
	"tests/unit/sandbox-glue/executor/execd/test_gate.c:sandbox-glue/executor/execd/execd-int.h"
	"tests/unit/sandbox-glue/executor/execd/fake_sbx.h:sandbox-glue/executor/execd/execd-int.h"
	"tests/unit/sandbox-glue/executor/backend/test_sbx_cfg.c:sandbox-glue/executor/backend/sbx-int.h"
)

while [ $# -gt 0 ]; do
	case $1 in
	--selftest) mode=selftest ;;
	--check) mode=check ;;
	--srcdir) src=$2; shift ;;
	--builddir) bld=$2; shift ;;
	*) echo "usage: $0 [--selftest | --check [--srcdir DIR] [--builddir DIR]]" >&2
	   exit 2 ;;
	esac
	shift
done

# check SRCDIR BUILDDIR ALLOW...: the check itself; exit 0 clean, 1 on
# any violation or when there is nothing to check.
check() {
	"$py" - "$@" <<'EOF'
import os, re, subprocess, sys

src, bld, allow = sys.argv[1], sys.argv[2], sys.argv[3:]
nm = os.environ.get("NM") or "nm"
PRODUCT = ("proxy", "policy", "firewall", "sandbox-glue")
INCDIRS = PRODUCT + ("tests", "bench")
out = []            # violations, one line each

def under(path, top):   # path is top (or one of tops) or inside it
    if isinstance(top, tuple):
        return any(under(path, t) for t in top)
    return path == top or path.startswith(top + "/")

def folder(s):
    return os.path.dirname(s)
RULES = [   # (tag, from folder, to folder, to_exact, why)
    ("c", "proxy/relay", "proxy/control", False, "the relay reaches the control plane only through hooks"),
    ("d", "firewall", "proxy", False, "firewall/ never uses proxy/"),
    ("d", "policy", "proxy", False, "policy/ never uses proxy/"),
    ("d", "proxy/lib", "proxy/relay", False, "proxy/lib/ is below the relay"),
    ("d", "proxy/lib", "proxy/control", False, "proxy/lib/ is below the control plane"),
    ("d", "proxy/lib", "proxy", True, "proxy/lib/ is below proxy/'s top"),
]
# DESIGN's "may use" of the executor's folders.  image/ keeps using
# backend/ (the store's primitives in backend/sbx_image_mount.h and the
# root file system's pieces in backend/sbx_root.h); cli/ uses image/ for
# its image verbs and backend/'s public headers for names and the
# configuration (sbx_cfg.h).
EXEC = "sandbox-glue/executor"
EXEC_USES = {
    EXEC + "/backend": ("proxy/lib", "policy", "sandbox-glue/agent"),
    EXEC + "/image": (EXEC + "/backend", "proxy/lib"),
    EXEC + "/execd": (EXEC + "/backend", EXEC + "/image", "proxy/lib",
                      "policy", "proxy/sluicectl"),
    EXEC + "/cli": (EXEC + "/image", EXEC + "/backend", "proxy/lib",
                    "proxy/sluicectl"),
}
def crossing(fs, ft):
    """(tag, why) when folder fs may not use folder ft, else None."""
    for tag, a, b, exact, why in RULES:
        if under(fs, a) and (ft == b if exact else under(ft, b)):
            return tag, why
    for a, uses in sorted(EXEC_USES.items()):
        if (under(fs, a) and not under(ft, a) and under(ft, PRODUCT)
                and not under(ft, uses)):
            return "f", "%s/ uses only %s" % (a, ", ".join(u + "/" for u in uses))
    # DESIGN: libc only (the shim has the agent built in, agent.h)
    for a, uses in (("policy", ()), ("sandbox-glue/shim",
                                     ("sandbox-glue/agent",)),
                    ("sandbox-glue/agent", ())):
        if (under(fs, a) and not under(ft, a) and under(ft, PRODUCT)
                and not any(under(ft, u) for u in uses)):
            return "d", a + "/ uses libc only"
    return None

# ---- includes ------------------------------------------------------
allowed = set()
for a in allow:
    f, _, h = a.partition(":")
    if not (f.startswith("tests/unit/") or f.startswith("tests/fuzz/")) or not h:
        sys.exit("layering: bad ALLOW_INT entry %r (tests/unit or tests/fuzz only)" % a)
    allowed.add((f, h))

srcs = []
for d in INCDIRS:
    for root, dirs, files in os.walk(os.path.join(src, d)):
        dirs[:] = sorted(x for x in dirs if x != "corpus" and not x.startswith("."))
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                srcs.append(os.path.relpath(os.path.join(root, f), src))
for s in srcs:
    if folder(s) == EXEC:
        out.append("(f) a source directly in %s/: %s [each file in one of %s]"
                   % (EXEC, s, ", ".join(sorted(os.path.basename(a) + "/"
                                                for a in EXEC_USES))))
byname = {}         # basename -> paths, to resolve bare names
for s in srcs:
    byname.setdefault(os.path.basename(s), []).append(s)

inc_re = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
n_inc, used_allow = 0, set()
for s in srcs:
    with open(os.path.join(src, s), errors="replace") as fh:
        lines = fh.readlines()
    for i, line in enumerate(lines, 1):
        m = inc_re.match(line)
        if not m:
            continue
        n_inc += 1
        p, where = m.group(1), "%s:%d" % (s, i)
        if p == "sluice-config.h":
            continue
        parts = p.split("/")
        if "." in parts or ".." in parts:
            out.append('(b) relative include: %s: "%s"' % (where, p))
            hdr = os.path.normpath(os.path.join(os.path.dirname(s), p))
        elif "/" not in p:
            out.append('(b) include not from the top of the tree: %s: "%s"' % (where, p))
            near = os.path.join(os.path.dirname(s), p)
            if os.path.exists(os.path.join(src, near)):
                hdr = near
            else:               # found through some -I
                hdr = (byname.get(p) or [p])[0]
        else:
            hdr = p
            if not (os.path.exists(os.path.join(src, p)) or
                    os.path.exists(os.path.join(bld, p))):
                out.append('(b) include does not resolve from the top of the tree: %s: "%s"' % (where, p))
        if hdr.endswith("-int.h") and os.path.dirname(hdr) != os.path.dirname(s):
            if (s, hdr) in allowed:
                used_allow.add((s, hdr))
            else:
                out.append("(a) private header outside its folder: %s: %s" % (where, hdr))
        why = crossing(folder(s), folder(hdr))
        if why:
            out.append("(%s) include crosses layers: %s: %s [%s]" % (why[0], where, hdr, why[1]))
for a in sorted(allowed - used_allow):
    print("layering: note: allowlist entry not used: %s:%s" % a)

# ---- objects -------------------------------------------------------
objs, stale = [], []
for d in PRODUCT:
    for root, dirs, files in os.walk(os.path.join(bld, d)):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in sorted(files):
            if f.endswith(".o"):
                objs.append(os.path.relpath(os.path.join(root, f), bld))

def source_of(o):
    """proxy/sluiced-main.o -> proxy/main.c; None if no such source."""
    d, b = os.path.split(o[:-2])
    cands = [b]
    m = re.match(r"^[A-Za-z0-9_]+-(.+)$", b)   # automake's target- prefix
    if m:
        cands.append(m.group(1))
    for c in cands:
        for top in (src, bld):
            if os.path.exists(os.path.join(top, d, c + ".c")):
                return os.path.join(d, c + ".c")
    return None

# The objects the build's Makefile names now: after a move, the old
# objects stay on disk in an in-tree build and must not count.
listed = set()
try:
    with open(os.path.join(bld, "Makefile")) as fh:
        listed = {m + ".o" for m in re.findall(r"([\w./+-]+)\.\$\(OBJEXT\)", fh.read())}
except OSError:
    pass

nodes = {}          # source -> {"objs": [...], "def": set(), "und": set()}
for o in objs:
    if re.match(r"^(tests|bench)_", os.path.basename(o)):
        continue                    # built for a test or a benchmark
    s = source_of(o)
    if s is None or (listed and o not in listed):
        stale.append(o)
        continue
    r = subprocess.run([nm, "-P", "-g", os.path.join(bld, o)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("layering: %s failed on %s: %s" % (nm, o, r.stderr.strip()))
    n = nodes.setdefault(s, {"objs": [], "def": set(), "und": set()})
    n["objs"].append(o)
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        (n["und"] if f[1] in ("U", "w", "v") else n["def"]).add(f[0])
for o in stale:
    print("layering: note: left out %s (stale: its source is gone or the Makefile no longer names it)" % o)
if not nodes:
    sys.exit("layering: FAIL: no objects found under %s (%s): build first"
             % (bld, " ".join(PRODUCT)))

definer = {}
for s, n in nodes.items():
    for sym in n["def"]:
        definer.setdefault(sym, set()).add(s)
edges = {s: {} for s in nodes}  # from -> to -> symbols
for s, n in nodes.items():
    for sym in n["und"]:
        for t in definer.get(sym, ()):
            if t != s:
                edges[s].setdefault(t, set()).add(sym)
n_edges = sum(len(t) for t in edges.values())

def syms(ss, k=4):
    ss = sorted(ss)
    return ", ".join(ss[:k]) + (" (+%d more)" % (len(ss) - k) if len(ss) > k else "")

# ---- (c), (d): references between folders ------------------------
for s in sorted(edges):
    for t in sorted(edges[s]):
        why = crossing(folder(s), folder(t))
        if why:
            out.append("(%s) %s -> %s: %s [%s]" % (why[0], s, t, syms(edges[s][t]), why[1]))

# ---- (e): cycles (Tarjan, iterative) -------------------------------
index, low, onstack, stack, sccs = {}, {}, set(), [], []
for root in sorted(nodes):
    if root in index:
        continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = len(index)
    stack.append(root); onstack.add(root)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is not None:
            if w not in index:
                index[w] = low[w] = len(index)
                stack.append(w); onstack.add(w)
                work.append((w, iter(sorted(edges[w]))))
            elif w in onstack:
                low[v] = min(low[v], index[w])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop(); onstack.discard(w); c.append(w)
                if w == v:
                    break
            if len(c) > 1:
                sccs.append(sorted(c))
cycles_bad = 0
for c in sorted(sccs, key=lambda c: (-len(c), c)):
    ok = all(under(folder(s), "proxy/relay") for s in c)
    cycles_bad += not ok
    print("layering: cycle of %d%s:" % (len(c), " (allowed: all in proxy/relay/)" if ok else ""))
    for s in c:
        inner = [t for t in sorted(edges[s]) if t in c]
        print("    %s -> %s" % (s, ", ".join(
            "%s(%s)" % (t, syms(edges[s][t], 2)) for t in inner)))
    if not ok:
        out.append("(e) cycle of %d leaves proxy/relay/: %s" % (len(c), " ".join(c)))

print("layering: checked %d objects (%d sources, %d left out as stale), %d edges, "
      "%d cycles (%d outside proxy/relay/); %d quoted includes in %d files; "
      "%d violations" % (sum(len(n["objs"]) for n in nodes.values()), len(nodes),
      len(stale), n_edges, len(sccs), cycles_bad, n_inc, len(srcs), len(out)))
if out:
    per = {}
    for v in out:
        per[v[:3]] = per.get(v[:3], 0) + 1
    print("layering: FAIL: " + ", ".join("%d %s" % (per[k], k) for k in sorted(per)))
    for v in sorted(out, key=lambda v: v[:3]):  # by rule, stable inside
        print("  " + v)
    sys.exit(1)
print("layering: OK")
EOF
}

# selftest: a small tree with violations of each kind, then the same
# tree fixed; the check must fail on the first (naming each violation),
# pass on the second, and fail on a build with no objects.
selftest() {
	local t rc=0 cc=${CC:-cc} o f want
	t=$(mktemp -d) || return 1
	# shellcheck disable=SC2064
	trap "rm -rf '$t'" RETURN
	w() { mkdir -p "$(dirname "$t/s/$1")"; cat >"$t/s/$1"; }
	# build OBJ...: compile each object from its source the automake way
	# (proxy/relay/sluiced-r1.o from proxy/relay/r1.c); the includes are
	# only read by the check, so they are left out of the compile
	build() {
		for o in "$@"; do
			f=$(dirname "$o")/$(basename "$o" | sed 's/^[A-Za-z0-9_]*-//').c
			grep -v '^#include' "$t/s/$f" |
				"$cc" -c -o "$t/s/$o.o" -x c - ||
				{ echo "layering: selftest: $cc failed on $f"; return 1; }
		done
	}
	objs=(policy/pol firewall/libfw_a-fw proxy/lib/libpx_a-lib
	    proxy/relay/sluiced-r1 proxy/relay/sluiced-r2
	    proxy/control/sluiced-ctl proxy/sluiced-main
	    proxy/tests_unit_test_webhook-webhook
	    sandbox-glue/executor/backend/libsbx_a-be
	    sandbox-glue/executor/image/libimage_a-im
	    sandbox-glue/executor/execd/libexecd_a-xd
	    sandbox-glue/executor/cli/sluice_run-cl)
	: | w sluice-config.h
	w firewall/fw-int.h <<-'E'
		int fw_priv(void);
	E
	w proxy/relay/relay-int.h <<-'E'
		int r2_f(void);
	E
	w tests/unit/firewall/test_fw.c <<-'E'
		#include "firewall/fw-int.h"
	E
	w policy/pol.c <<-'E'
		int px_top(void);
		int pol_f(void) { return px_top(); }
	E
	# fw_hook would come from the test's copy of webhook.c: not counted
	: | w proxy/lib/lib.h
	w firewall/fw.c <<-'E'
		#include "firewall/fw-int.h"
		#include "proxy/lib/lib.h"
		int fw_hook(void);
		int fw_f(void) { return fw_hook(); }
	E
	w proxy/webhook.c <<-'E'
		int fw_hook(void) { return 0; }
	E
	w proxy/lib/lib.c <<-'E'
		#include "../relay/relay-int.h"
		int px_top(void);
		int lib_f(void) { return px_top(); }
	E
	w proxy/relay/r1.c <<-'E'
		#include "relay-int.h"
		int r2_f(void), ctl_f(void);
		int r1_f(void) { return r2_f() + ctl_f(); }
	E
	w proxy/relay/r2.c <<-'E'
		#include "proxy/relay/relay-int.h"
		int r1_f(void);
		int r2_f(void) { return r1_f(); }
	E
	w proxy/control/ctl.c <<-'E'
		#include "proxy/relay/relay-int.h"
		#include "proxy/nosuch.h"
		int r1_f(void);
		int ctl_f(void) { return 0; }
		int ctl_g(void) { return r1_f(); }
	E
	w proxy/main.c <<-'E'
		#include "sluice-config.h"
		int lib_f(void);
		int px_top(void) { return lib_f(); }
	E
	# the executor: backend/ including image/ and calling execd/, which
	# calls it back (a cycle across folders), cli/ calling execd/, and a
	# source left at the executor's top
	: | w sandbox-glue/executor/image/img.h
	: | w sandbox-glue/executor/backend/be.h
	w sandbox-glue/executor/backend/be.c <<-'E'
		#include "sandbox-glue/executor/image/img.h"
		int xd_f(void);
		int be_f(void) { return xd_f(); }
	E
	w sandbox-glue/executor/image/im.c <<-'E'
		int im_f(void) { return 0; }
	E
	w sandbox-glue/executor/execd/xd.c <<-'E'
		#include "sandbox-glue/executor/backend/be.h"
		int be_f(void), im_f(void);
		int xd_f(void) { return be_f() + im_f(); }
		int xd_g(void) { return 0; }
	E
	w sandbox-glue/executor/cli/cl.c <<-'E'
		int xd_g(void);
		int cl_f(void) { return xd_g(); }
	E
	w sandbox-glue/executor/stray.c <<-'E'
		int stray_f(void) { return 0; }
	E
	build "${objs[@]}" || return 1
	# a stale object: its source is gone (moved); counted, it would break (d)
	printf 'int px_top(void);\nint g(void) { return px_top(); }\n' >"$t/s/policy/gone.c"
	build policy/gone || return 1
	rm "$t/s/policy/gone.c"

	check "$t/s" "$t/s" "tests/unit/firewall/test_fw.c:firewall/fw-int.h" >"$t/out" 2>&1
	[ $? -eq 1 ] || { echo "layering: selftest: the bad tree did not fail"; rc=1; }
	want=(
		'(a) private header outside its folder: proxy/control/ctl.c:1: proxy/relay/relay-int.h'
		'(a) private header outside its folder: proxy/lib/lib.c:1: proxy/relay/relay-int.h'
		'(b) relative include: proxy/lib/lib.c:1: "../relay/relay-int.h"'
		'(b) include not from the top of the tree: proxy/relay/r1.c:1: "relay-int.h"'
		'(b) include does not resolve from the top of the tree: proxy/control/ctl.c:2: "proxy/nosuch.h"'
		'(c) proxy/relay/r1.c -> proxy/control/ctl.c: ctl_f'
		'(d) policy/pol.c -> proxy/main.c: px_top'
		'(d) proxy/lib/lib.c -> proxy/main.c: px_top'
		'(e) cycle of 2 leaves proxy/relay/: proxy/lib/lib.c proxy/main.c'
		'(e) cycle of 3 leaves proxy/relay/: proxy/control/ctl.c proxy/relay/r1.c proxy/relay/r2.c'
		'left out policy/gone.o (stale'
		'(d) include crosses layers: firewall/fw.c:2: proxy/lib/lib.h [firewall/ never uses proxy/]'
		'(d) include crosses layers: proxy/lib/lib.c:1: proxy/relay/relay-int.h [proxy/lib/ is below the relay]'
		'(e) cycle of 2 leaves proxy/relay/: sandbox-glue/executor/backend/be.c sandbox-glue/executor/execd/xd.c'
		'(f) include crosses layers: sandbox-glue/executor/backend/be.c:1: sandbox-glue/executor/image/img.h [sandbox-glue/executor/backend/ uses only proxy/lib/, policy/, sandbox-glue/agent/]'
		'(f) sandbox-glue/executor/backend/be.c -> sandbox-glue/executor/execd/xd.c: xd_f'
		'(f) sandbox-glue/executor/cli/cl.c -> sandbox-glue/executor/execd/xd.c: xd_g'
		'(f) a source directly in sandbox-glue/executor/: sandbox-glue/executor/stray.c'
		'; 17 violations'
	)
	for f in "${want[@]}"; do
		grep -qF -- "$f" "$t/out" || { echo "layering: selftest: missing: $f"; rc=1; }
	done
	if grep -q 'webhook\|gone\.c' "$t/out"; then
		echo "layering: selftest: a test's or a stale object was counted"; rc=1
	fi
	[ $rc = 0 ] || { echo "---- selftest output (bad tree)"; cat "$t/out"; }

	# the same tree fixed: each rule must also let good code through,
	# and a cycle inside proxy/relay/ is allowed
	w proxy/lib/lib.c <<-'E'
		#include "policy/pol.h"
		int lib_f(void) { return 0; }
	E
	: | w policy/pol.h
	w proxy/relay/r1.c <<-'E'
		#include "proxy/relay/relay-int.h"
		int r2_f(void), lib_f(void);
		int r1_f(void) { return r2_f() + lib_f(); }
	E
	w proxy/control/ctl.c <<-'E'
		#include "proxy/lib/lib.h"
		int r1_f(void);
		int ctl_f(void) { return r1_f(); }
	E
	w policy/pol.c <<-'E'
		int pol_f(void) { return 0; }
	E
	w firewall/fw.c <<-'E'
		#include "firewall/fw-int.h"
		int fw_hook(void);
		int fw_f(void) { return fw_hook(); }
	E
	w proxy/main.c <<-'E'
		int lib_f(void), ctl_f(void);
		int px_top(void) { return lib_f() + ctl_f(); }
	E
	# the executor's layers as DESIGN draws them: image/ on backend/,
	# execd/ on both, cli/ on image/ and backend/
	w sandbox-glue/executor/backend/be.c <<-'E'
		int lib_f(void);
		int be_f(void) { return lib_f(); }
	E
	w sandbox-glue/executor/image/im.c <<-'E'
		#include "sandbox-glue/executor/backend/be.h"
		int be_f(void);
		int im_f(void) { return be_f(); }
	E
	w sandbox-glue/executor/cli/cl.c <<-'E'
		#include "sandbox-glue/executor/image/img.h"
		int im_f(void), be_f(void);
		int cl_f(void) { return im_f() + be_f(); }
	E
	rm "$t/s/sandbox-glue/executor/stray.c"
	rm -f "$t/s/policy/gone.o"
	build "${objs[@]}" || return 1
	# an object of a target that was renamed: its source is still there,
	# but the Makefile names only the new objects
	printf 'int ctl_f(void);\nint r9(void) { return ctl_f(); }\n' >"$t/s/proxy/relay/old.c"
	build proxy/relay/oldtarget-old || return 1
	rm "$t/s/proxy/relay/old.c"
	cp "$t/s/proxy/relay/oldtarget-old.o" "$t/s/proxy/relay/oldtarget-r1.o"
	printf 'am_x_OBJECTS = %s\n' "${objs[*]/%/.\$(OBJEXT)}" >"$t/s/Makefile"
	if ! check "$t/s" "$t/s" "tests/unit/firewall/test_fw.c:firewall/fw-int.h" >"$t/out" 2>&1; then
		echo "layering: selftest: the fixed tree failed"; cat "$t/out"; rc=1
	elif ! grep -q 'cycle of 2 (allowed' "$t/out"; then
		echo "layering: selftest: the relay's own cycle not seen"; cat "$t/out"; rc=1
	elif ! grep -q 'left out proxy/relay/oldtarget-r1.o (stale' "$t/out"; then
		echo "layering: selftest: an object the Makefile does not name was counted"; cat "$t/out"; rc=1
	fi

	# no objects at all: must fail, not pass
	mkdir -p "$t/empty/proxy"
	if check "$t/s" "$t/empty" >"$t/out" 2>&1 || ! grep -q 'no objects found' "$t/out"; then
		echo "layering: selftest: an empty build passed"; cat "$t/out"; rc=1
	fi
	[ $rc = 0 ] && echo "layering: selftest passed"
	return $rc
}

case $mode in
selftest) selftest ;;
check) check "$src" "$bld" "${ALLOW_INT[@]}" ;;
all) selftest || exit 1
     check "$src" "$bld" "${ALLOW_INT[@]}" ;;
esac
