#!/bin/sh
# sluice demo: the whole product on one machine.
#
#   sluiced with its embedded defaults (only paths, the ceiling and a
#   resolver map set), a chat sandbox made by sluice-run (namespaces, no
#   network device, the shim and the chat's socket inside; its root the
#   image of profile base when one is built, else the host's /usr, as it
#   says), a pip install
#   from a registry-like upstream through the broker, a second command that
#   reaches a host outside the chat's tier and raises a prompt (answered at
#   the terminal, or automatically with --yes or without a terminal), and
#   the connection-log records of it all.
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
sluice_run=${SLUICE_RUN:-$top/sandbox-glue/executor/sluice-run}
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

tmp=$(mktemp -d /tmp/sluice-demo.XXXXXX)
chmod 755 "$tmp"
pids= created=0
run() { "$sluice_run" --state-dir "$tmp/sandboxes" \
	--control "$tmp/run/control.sock" --config "$tmp/sluice-run.json" "$@"; }
cleanup() {
	rc=$?
	[ $created = 1 ] && run destroy --chat demo-chat >/dev/null 2>&1 || true
	for p in $pids; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
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
cat >"$tmp/sluiced.json" <<JSON
{
  "user": "nobody",
  "runtime_dir": "$tmp/run",
  "state_file": "$tmp/state.json",
  "log": { "path": "$tmp/connections.jsonl" },
  "control": { "socket": "$tmp/run/control.sock" },
  "ceiling": "public",
  "ports": { "registries": [443, 80, $reg_port], "public": [443, 80, $web_port] },
  "allow_cidrs": [ "127.0.0.1/32" ],
  "dns": { "hosts": { "pypi.org": ["127.0.0.1"],
                      "example.com": ["127.0.0.1"] } }
}
JSON
cat >"$tmp/sluice-run.json" <<JSON
{ "shim": "$shim", "shim_static": "$shim_static", "image_dir": "$image_dir" }
JSON
# the sandbox's root: the base image if there is one (it has pip)
profile=host
if [ -x "$shim_static" ] && [ -s "$image_dir/profiles/base" ] &&
	[ -f "$image_dir/$(cat "$image_dir/profiles/base").erofs" ]; then
	profile=base
fi

step "sluiced -c $tmp/sluiced.json   (ceiling: public; built-in registry list)"
"$sluiced" -c "$tmp/sluiced.json" 2>"$tmp/sluiced.err" &
pids="$pids $!"
wait_for sluiced grep -q ready "$tmp/sluiced.err"
wait_for "the registry" curl -s -o /dev/null "http://127.0.0.1:$reg_port/simple/"
wait_for "the web server" curl -s -o /dev/null "http://127.0.0.1:$web_port/"

step "a sandbox for chat demo-chat, tier registries"
if [ $profile = base ]; then
	echo "(its root: the image of profile base, $(cut -c1-12 \
	    "$image_dir/profiles/base"), read-only; nothing of the host's /usr)"
else
	echo "(no image of profile base in $image_dir: the sandbox's root is" \
	    "the host's /usr, read-only; \"sluice-run image build base\" makes" \
	    "one in a few minutes)"
fi
echo "\$ sluice-run create --chat demo-chat --tenant demo --user alice --tier registries --profile $profile"
run create --chat demo-chat --tenant demo --user alice --tier registries \
	--profile $profile
created=1

step "inside the sandbox: no network device, only the shim on loopback"
echo "\$ sluice-run exec --chat demo-chat -- sh -c 'cat /proc/net/dev; echo \$HTTPS_PROXY'"
run exec --chat demo-chat -- sh -c 'cat /proc/net/dev; echo $HTTPS_PROXY'

step "pip installs a package from the registry through the broker"
cmd="pip install --index-url http://pypi.org:$reg_port/simple/ --trusted-host pypi.org --target /workspace/pkgs sluicedemo"
echo "\$ sluice-run exec --chat demo-chat -- python3 -m $cmd"
# shellcheck disable=SC2086
run exec --chat demo-chat -- python3 -m $cmd
echo "\$ sluice-run exec --chat demo-chat -- python3 -c 'import sluicedemo; ...'"
run exec --chat demo-chat --env PYTHONPATH=/workspace/pkgs -- \
	python3 -c 'import sluicedemo; print("sluicedemo.VALUE =", sluicedemo.VALUE)'

step "a host outside the chat's tier: the broker asks the app"
if [ $yes = 1 ]; then
	echo "(answering with: sluicectl prompts watch --yes-all)"
	"$sluicectl" --socket "$tmp/run/control.sock" prompts watch --yes-all \
		>"$tmp/approver.log" 2>&1 &
	approver=$!
else
	echo "(sluicectl prompts watch is the approver: press o, c or d)"
	"$sluicectl" --socket "$tmp/run/control.sock" prompts watch \
		</dev/tty &
	approver=$!
fi
pids="$approver $pids"
# the approver must be listening before the prompt, or it is refused at once
wait_for "the approver" sh -c "'$sluicectl' --socket '$tmp/run/control.sock' \
	--json health | grep -q '\"approvers\":[1-9]'"
echo "\$ sluice-run exec --chat demo-chat -- curl -sS http://example.com:$web_port/"
run exec --chat demo-chat -- curl -sS --max-time 120 "http://example.com:$web_port/" || true
kill "$approver" 2>/dev/null && wait "$approver" 2>/dev/null || true
[ $yes = 1 ] && sed 's/^/  approver: /' "$tmp/approver.log"

step "sluice-run destroy --chat demo-chat"
run destroy --chat demo-chat
created=0

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
