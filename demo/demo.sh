#!/bin/sh
# sluice demo: the whole product on one machine.
#
#   sluiced with its embedded defaults (only paths, the ceiling and a
#   resolver map set) and sluice-execd beside it, as root; then the app's
#   half, as an unprivileged app on the Python SDK (demo/app.py, run as
#   nobody): a chat sandbox (namespaces, no network device, the shim and
#   the chat's socket inside), a pip install from a registry-like upstream
#   through the broker, a command that reaches a host outside the chat's
#   tier and raises a prompt (answered at the terminal, or automatically
#   with --yes or without a terminal), an artifact collected, the sandbox
#   destroyed; and the connection-log records of it all.
#
# The upstreams are local: pypi.org and example.com are mapped to 127.0.0.1
# by the broker's own resolver settings (dns.hosts), so it runs the same
# with or without internet.  It needs root (namespaces, mounts, cgroups).
set -eu
usage() { echo "usage: demo/demo.sh [--yes]" >&2; exit 2; }
yes=0
case "${1-}" in
--yes|-y) yes=1 ;;
"") ;;
*) usage ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
sluiced=${SLUICED:-$top/proxy/sluiced}
sluicectl=${SLUICECTL:-$top/proxy/sluicectl/sluicectl}
execd=${SLUICE_EXECD:-$top/sandbox-glue/executor/execd/sluice-execd}
shim=${SLUICE_SHIM:-$top/sandbox-glue/shim/sluice-shim}
shim_static=${SLUICE_SHIM_STATIC:-$top/sandbox-glue/shim/sluice-shim-static}
# where "sluice-run image build base" puts its image by default
image_dir=${SLUICE_IMAGE_DIR:-/var/lib/sluice-run/images}
if [ "$(id -u)" != 0 ]; then
	echo "demo: the sandbox needs root (user, mount and pid namespaces);" \
	    "run it as root" >&2
	exit 1
fi
[ -t 0 ] && [ -r /dev/tty ] || yes=1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX")
chmod 755 "$tmp"
pids=
execd_up() {
	curl -s -o /dev/null --max-time 10 --unix-socket "$tmp/xrun/exec.sock" \
	    http://localhost/v1/health 2>/dev/null
}
cleanup() {
	rc=$?
	# a sandbox the app left (interrupted) goes before its executor
	# stops; an executor that died meanwhile is started again on its
	# state directory (it adopts the sandboxes there) to delete them
	if [ -n "$(ls -A "$tmp/xstate" 2>/dev/null)" ]; then
		if ! execd_up && [ -f "$tmp/execd.json" ]; then
			"$execd" -c "$tmp/execd.json" 2>"$tmp/execd2.err" &
			pids="$! $pids"
			i=0
			until grep -q ready: "$tmp/execd2.err" 2>/dev/null ||
			    [ $i -ge 100 ]; do
				i=$((i + 1))
				sleep 0.1
			done
		fi
		for id in $(ls "$tmp/xstate"); do
			curl -s -o /dev/null -X DELETE --max-time 60 \
			    --unix-socket "$tmp/xrun/exec.sock" \
			    "http://localhost/v1/sandboxes/$id" 2>/dev/null || true
		done
	fi
	for p in $pids; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
	done
	# never into a workspace still mounted (its mount stays to be seen)
	rm -rf --one-file-system "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_for() {	# what, command...
	what=$1; shift; i=0
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -gt 100 ] && { echo "demo: $what did not start" >&2; exit 1; }
		sleep 0.1
	done
}
step() { printf '\n== %s\n' "$*"; }

reg_port=$(free_port)
web_port=$(free_port)
python3 "$top/demo/registry.py" --root "$tmp/registry" --port "$reg_port" \
	2>"$tmp/registry.log" &
pids="$pids $!"
mkdir -p "$tmp/web"
echo "hello from example.com (a local stand-in)" >"$tmp/web/index.html"
python3 -m http.server "$web_port" --bind 127.0.0.1 --directory "$tmp/web" \
	>"$tmp/web.log" 2>&1 &
pids="$pids $!"

# Started as root, sluiced runs its proxy process as an unprivileged user
# ("user", default "sluice"); the demo borrows "nobody" and lets it own
# $tmp, where the log, the state file and the sockets go.
chown nobody "$tmp"
appgid=$(getent group nogroup | cut -d: -f3)
cat >"$tmp/sluiced.json" <<JSON
{
  "user": "nobody",
  "runtime_dir": "$tmp/run",
  "state_file": "$tmp/state.json",
  "log": { "path": "$tmp/connections.jsonl" },
  "control": { "socket": "$tmp/run/control.sock", "socket_group": "nogroup",
               "app_gids": [ $appgid ] },
  "ceiling": "public",
  "ports": { "registries": [443, 80, $reg_port], "public": [443, 80, $web_port] },
  "allow_cidrs": [ "127.0.0.1/32" ],
  "dns": { "hosts": { "pypi.org": ["127.0.0.1"],
                      "example.com": ["127.0.0.1"] } }
}
JSON
# the sandbox's root: the base image if there is one (it has pip),
# else the host's /usr
profile=host
if [ -x "$shim_static" ] && [ -s "$image_dir/profiles/base" ] &&
	[ -f "$image_dir/$(cat "$image_dir/profiles/base").erofs" ]; then
	profile=base
fi
# sluice-execd owns the sandboxes; the app role goes to nogroup, the
# group the demo's app (nobody) runs in, on both daemons.
cat >"$tmp/execd.json" <<JSON
{
  "runtime_dir": "$tmp/xrun",
  "state_dir": "$tmp/xstate",
  "control_socket": "$tmp/run/control.sock",
  "shim": "$shim",
  "shim_static": "$shim_static",
  "image_dir": "$image_dir",
  "profile": "$profile",
  "log": { "path": "$tmp/execd.jsonl" },
  "socket": { "group": "nogroup", "mode": "0660" },
  "roles": { "app": { "groups": ["nogroup"] } }
}
JSON

step "sluiced -c $tmp/sluiced.json   (ceiling: public; built-in registry list)"
"$sluiced" -c "$tmp/sluiced.json" 2>"$tmp/sluiced.err" &
pids="$pids $!"
wait_for sluiced grep -q ready "$tmp/sluiced.err"
wait_for "the registry" curl -s -o /dev/null "http://127.0.0.1:$reg_port/simple/"
wait_for "the web server" curl -s -o /dev/null "http://127.0.0.1:$web_port/"

step "sluice-execd -c $tmp/execd.json   (the app role: group nogroup)"
"$execd" -c "$tmp/execd.json" 2>"$tmp/execd.err" &
pids="$! $pids"
wait_for sluice-execd grep -q ready: "$tmp/execd.err"
if [ $profile = base ]; then
	echo "(the sandboxes' root: the image of profile base, $(cut -c1-12 \
	    "$image_dir/profiles/base"), read-only; nothing of the host's /usr)"
else
	echo "(no image of profile base in $image_dir: the sandboxes' root is" \
	    "the host's /usr, read-only; \"sluice-run image build base\" makes" \
	    "one in a few minutes)"
fi

# The app: the SDK from this tree (copied where nobody can read it), run
# as nobody with Debian's python3 (3.11).
py=/usr/bin/python3
[ -x "$py" ] || py=python3
mkdir -p "$tmp/app/out"
cp -R "$top/sdk/python/src/sluice" "$top/demo/app.py" "$tmp/app/"
chown -R nobody "$tmp/app"
flag=
[ $yes = 1 ] && flag=--yes
echo "\$ setpriv --reuid nobody --regid nogroup --clear-groups python3 demo/app.py ..."
app() {
	setpriv --reuid nobody --regid "$appgid" --clear-groups \
		env -i PATH=/usr/bin:/bin HOME="$tmp/app" LANG=C.UTF-8 \
		PYTHONPATH="$tmp/app" PYTHONDONTWRITEBYTECODE=1 \
		"$py" "$tmp/app/app.py" "$tmp/xrun/exec.sock" "$tmp/run/control.sock" \
		"http://pypi.org:$reg_port/simple/" "http://example.com:$web_port/" \
		"$tmp/app/out" $flag
}
if [ $yes = 1 ]; then app </dev/null; else app </dev/tty; fi

step "the connection log (one line per record; removed with $tmp at exit)"
python3 - "$tmp/connections.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    e = r["event"]
    if e == "decision":
        print("%-13s %-4s %-7s %s:%s  %s %s%s" % (e, r["seq"], r.get("method"),
              r.get("host"), r.get("port"), r["decision"],
              r.get("rule") or r.get("reason"),
              "  answer=%s" % r["answer"] if r.get("answer") else ""))
    elif e == "close":
        print("%-13s %-4s %-7s %s:%s  up %s down %s" % (e, r["seq"],
              r.get("method"), r.get("host"), r.get("port"),
              r.get("bytes_up"), r.get("bytes_down")))
    elif e in ("prompt", "prompt_answer"):
        print("%-13s %-4s %-7s %s:%s  %s" % (e, r["seq"], "", r.get("host"),
              r.get("port"), r.get("answer") or r.get("prompt") or ""))
    else:
        print("%-13s %-4s %-7s %s" % (e, r["seq"], r.get("action") or "",
              r.get("session") or ""))
PY
echo "\$ sluicectl log verify"
"$sluicectl" log verify --file "$tmp/connections.jsonl"
