#!/bin/sh
# sluice demo: sluiced with its embedded defaults plus one demo chat,
# a local upstream standing in for a package registry, one allowed and
# one refused request through the broker, and the log records of both.
# Everything stays on 127.0.0.1.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
sluiced=${SLUICED:-$top/proxy/sluiced}
tmp=$(mktemp -d /tmp/sluice-demo.XXXXXX)
up_pid= sl_pid=
cleanup() {
	rc=$?
	for p in $sl_pid $up_pid; do
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
up_port=$(free_port)
px_port=$(free_port)

mkdir -p "$tmp/www/simple/requests"
echo '<a href="requests-2.32.3.tar.gz">requests-2.32.3.tar.gz</a>' \
	>"$tmp/www/simple/requests/index.html"
python3 -m http.server "$up_port" --bind 127.0.0.1 --directory "$tmp/www" \
	>"$tmp/upstream.log" 2>&1 &
up_pid=$!

# Started as root, sluiced runs its proxy process as an unprivileged user
# ("user", default "sluice"); the demo borrows "nobody" and lets it own
# $tmp, where the log, the state file and the sockets go.
user_line=
if [ "$(id -u)" = 0 ]; then
	chown nobody "$tmp" && chmod 755 "$tmp"
	user_line='"user": "nobody",'
fi
cat >"$tmp/sluiced.json" <<JSON
{
  $user_line
  "runtime_dir": "$tmp/run",
  "state_file": "$tmp/state.json",
  "ceiling": "registries",
  "listen": { "tcp": ["127.0.0.1:$px_port"] },
  "sessions": [ { "id": "demo-chat", "tenant": "demo", "user": "alice",
                  "tier": "registries", "source": "127.0.0.1" } ],
  "registries": [ "pypi.demo.test" ],
  "ports": { "registries": [443, 80, $up_port] },
  "allow_cidrs": [ "127.0.0.1/32" ],
  "dns": { "hosts": { "pypi.demo.test": ["127.0.0.1"],
                      "example.demo.test": ["127.0.0.1"] } },
  "log": { "path": "$tmp/connections.jsonl" }
}
JSON
echo "== sluiced -c $tmp/sluiced.json (chat demo-chat, tier registries)"
"$sluiced" -c "$tmp/sluiced.json" 2>"$tmp/sluiced.err" &
sl_pid=$!
i=0
until grep -q ready "$tmp/sluiced.err" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 50 ] || ! kill -0 "$sl_pid" 2>/dev/null; then
		cat "$tmp/sluiced.err"; exit 1
	fi
	sleep 0.1
done
i=0
until curl -s -o /dev/null "http://127.0.0.1:$up_port/"; do
	i=$((i + 1)); [ $i -gt 50 ] && { echo "upstream did not start"; exit 1; }
	sleep 0.1
done

echo
echo "== allowed: a registry host"
echo "\$ curl -x http://127.0.0.1:$px_port http://pypi.demo.test:$up_port/simple/requests/"
curl -sS -i --max-time 10 -x "http://127.0.0.1:$px_port" \
	"http://pypi.demo.test:$up_port/simple/requests/" | sed -n '1p;$p'
echo
echo "== refused: a host outside the chat's tier and the ceiling"
echo "\$ curl -x http://127.0.0.1:$px_port http://example.demo.test:$up_port/"
curl -sS -i --max-time 10 -x "http://127.0.0.1:$px_port" \
	"http://example.demo.test:$up_port/" | grep -i -e '^HTTP' -e '^x-sluice' -e 'refused'
echo
echo "== connection log ($tmp/connections.jsonl)"
grep -e '"event":"decision"' -e '"event":"close"' "$tmp/connections.jsonl"
