#!/bin/sh
# t_fw_transparent.sh: transparent mode end to end.  A "sandbox"
# namespace on a veth pair (10.200.0.2 <-> 10.200.0.1) runs curl with no
# proxy settings; sluiced's table redirects its TCP 80 and 443 to the
# transparent listener, which decides by the Host header or the TLS SNI
# for the session of the source address.  The upstreams (HTTP and TLS)
# listen on 198.51.100.10, an address on a dummy interface (or lo) of
# the test's own namespace, admitted with allow_cidrs; dns.hosts maps the
# test names to it.
#
# Outside: record the host namespace, re-exec under `unshare -n` (the
# broker's namespace); the sandbox is a second `unshare -n` process of
# this test, entered with nsenter.  Exit 77 (skip) when a tool or the
# permission is missing, or 1 with SLUICE_TEST_STRICT=1.  Inside: refuse
# to run if the namespace is the recorded host one.
set -u

. "$(dirname "$0")/lib.sh"
fw_netns "${1:-}" nsenter nft curl ip openssl "$py"

fw_tmp
trap 'exit 1' INT TERM HUP PIPE
upid=      # the upstream servers
sbpid=     # the process holding the sandbox namespace (in $pids)
evpid=     # the event-stream reader (approver)
fw_cleanup_hook() {
	for p in $evpid $upid; do
		kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
}
fail() {
	echo "FAIL: $*" >&2
	[ -f "$tmp/err" ] && { echo "--- sluiced stderr:" >&2; tail -n 30 "$tmp/err" >&2; }
	[ -f "$tmp/conn.jsonl" ] && { echo "--- log:" >&2; tail -n 10 "$tmp/conn.jsonl" >&2; }
	exit 1
}
# sb CMD...: run in the sandbox namespace
sb() { nsx "$sbpid" "$@"; }

# --- links: the sandbox on a veth pair, the upstream on a dummy
ip link set lo up || skip "no lo"
ip link add sb0 type veth peer name sb1 2>/dev/null || skip "no veth"
# the upstream address on a dummy link, or on lo where the kernel has
# no dummy driver: either way an address of this namespace only
updev=lo
ip link add up0 type dummy 2>/dev/null && ip link set up0 up && updev=up0
ip addr add 10.200.0.1/24 dev sb0 && ip link set sb0 up &&
    ip addr add 198.51.100.10/32 dev "$updev" || fail "broker links"
newns sbpid
ip link set sb1 netns "$sbpid" || fail "move sb1"
sb ip link set lo up && sb ip addr add 10.200.0.2/24 dev sb1 &&
    sb ip addr add 10.200.0.3/24 dev sb1 &&
    sb ip link set sb1 up && sb ip route add default via 10.200.0.1 ||
    fail "sandbox links"
# IPv6 too, without duplicate address detection holding the addresses.
# The neighbours are resolved by neighbour discovery through the input
# guard, which accepts the ICMPv6 solicitations and advertisements from
# the sandbox subnets (no static entries: the IPv6 leg below proves it)
ip -6 addr add fd20::1/64 dev sb0 nodad &&
    sb ip -6 addr add fd20::2/64 dev sb1 nodad &&
    sb ip -6 route add default via fd20::1 || fail "sandbox IPv6"

# --- upstreams: HTTP on :80, TLS on :443, each answering with the name
#     it was asked for, so a test sees which host was reached
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" \
    -out "$tmp/cert.pem" -days 2 -subj /CN=allowed.test \
    -addext "subjectAltName=DNS:allowed.test,DNS:blocked.test,DNS:ask.test" \
    >/dev/null 2>&1 || fail "openssl req"
cat > "$tmp/up.py" <<'EOF'
import http.server, socketserver, ssl, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = ("upstream %s %s %s\n" % (
            "tls" if isinstance(self.connection, ssl.SSLSocket) else "http",
            self.headers.get("Host"), self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
plain = S(("198.51.100.10", 80), H)
tls = S(("198.51.100.10", 443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
threading.Thread(target=plain.serve_forever, daemon=True).start()
print("ready", flush=True)
tls.serve_forever()
EOF
"$py" "$tmp/up.py" "$tmp/cert.pem" "$tmp/key.pem" > "$tmp/up.out" 2>&1 &
upid=$!

# --- sluiced: the transparent listener, the firewall with the veth subnet as the sandboxes'
# the proxy process runs as nobody (privilege separation): it must be
# be able to write its state and log under $tmp
chown nobody "$tmp" && chmod 755 "$tmp"
cat > "$tmp/sluiced.json" <<EOF
{
  "user": "nobody",
  "runtime_dir": "$tmp/run",
  "state_file": "$tmp/state.json",
  "log": { "path": "$tmp/conn.jsonl" },
  "ceiling": "registries",
  "registries": ["allowed.test", "ask.test"],
  "listen": { "transparent": ["[::]:3129"] },
  "allow_cidrs": ["198.51.100.10"],
  "dns": { "servers": ["127.0.0.1:5353"],
           "hosts": { "allowed.test": ["198.51.100.10"],
                      "blocked.test": ["198.51.100.10"],
                      "ask.test": ["198.51.100.10"] } },
  "prompt": { "timeout_s": 20 },
  "firewall": { "enabled": true,
                "sandbox_subnets": ["10.200.0.0/24", "fd20::/64"] }
}
EOF
"$sluiced" -c "$tmp/sluiced.json" 2>"$tmp/err" &
pid=$!
i=0
until api http://sluice/v1/health >/dev/null 2>&1 &&
    grep -q ready "$tmp/up.out" 2>/dev/null; do
	kill -0 "$pid" 2>/dev/null || { wait "$pid"; pid=; fail "sluiced exited at start"; }
	kill -0 "$upid" 2>/dev/null || fail "upstream: $(cat "$tmp/up.out")"
	i=$((i + 1)); [ $i -gt 100 ] && fail "not ready after 10 s"
	sleep 0.1
done

# the sandbox's sessions by source address (IPv4 and IPv6), made the
# way an app does (a session from the file could not change its tier)
api -X POST -H 'Content-Type: application/json' -d '{"id": "sb-1",
    "tenant": "t", "user": "u", "tier": "registries",
    "source": "10.200.0.2"}' http://sluice/v1/sessions >/dev/null ||
    fail "create session"
api -X POST -H 'Content-Type: application/json' -d '{"id": "sb-6", "tenant": "t", "user": "u",
    "tier": "registries", "source": "fd20::2"}' \
    http://sluice/v1/sessions >/dev/null || fail "create session 6"

# the table holds the redirect and admits the transparent port
"$sluiced" --print-firewall -c "$tmp/sluiced.json" > "$tmp/want" ||
    fail "--print-firewall"
nft list table inet sluice > "$tmp/got" || fail "nft list"
diff -u "$tmp/want" "$tmp/got" >&2 || fail "applied table differs"
grep -q 'type nat hook prerouting priority dstnat' "$tmp/got" ||
    fail "no nat chain"
grep -q 'ip saddr @sandbox4 tcp dport @redirect_ports counter .* redirect to :3129' \
    "$tmp/got" || fail "no redirect rule"

# c NAME PORT SCHEME [curl options]: curl in the sandbox with no proxy
# settings, the name resolved to the upstream address by --resolve
c() {
	name=$1 port=$2 scheme=$3
	shift 3
	sb env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY \
	    -u ALL_PROXY -u all_proxy curl --noproxy '*' -sS -k \
	    --max-time 10 --resolve "$name:$port:${ADDR:-198.51.100.10}" \
	    "$@" "$scheme://$name:$port/p?x=1"
}
# rec FILTER: the last log record that FILTER (python, r the record)
# accepts, as JSON, or nothing
rec() {
	"$py" -c 'import json, sys
hit = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if eval(sys.argv[2]):
        hit = r
if hit is not None:
    print(json.dumps(hit, sort_keys=True))' "$tmp/conn.jsonl" "$1"
}

# 1. plain HTTP to an allowed host: through sluiced, decided on Host,
#    the original destination in the record
out=$(c allowed.test 80 http) || fail "http allowed: curl"
[ "$out" = "upstream http allowed.test /p?x=1" ] || fail "http allowed: $out"
r=$(rec 'r["event"] == "decision" and r["host"] == "allowed.test" and r["port"] == 80')
[ -n "$r" ] || fail "http allowed: no record"
echo "$r" | grep -q '"decision": "allow"' || fail "http allowed: $r"
echo "$r" | grep -q '"orig_dst": "198.51.100.10:80"' || fail "orig_dst: $r"
echo "$r" | grep -q '"transport": "transparent:10.200.0.2:[0-9]*"' ||
    fail "transport: $r"
echo "$r" | grep -q '"session": "sb-1"' || fail "session: $r"
echo "$r" | grep -q '"dialed": "198.51.100.10"' || fail "dialed: $r"

# 2. HTTPS to an allowed host: decided on the SNI, relayed untouched
#    (the upstream's own certificate, its own TLS)
out=$(c allowed.test 443 https) || fail "https allowed: curl"
[ "$out" = "upstream tls allowed.test /p?x=1" ] || fail "https allowed: $out"
r=$(rec 'r["event"] == "decision" and r["host"] == "allowed.test" and r["port"] == 443')
echo "$r" | grep -q '"decision": "allow"' || fail "https allowed: $r"
echo "$r" | grep -q '"sni": "allowed.test"' || fail "sni: $r"
echo "$r" | grep -q '"orig_dst": "198.51.100.10:443"' || fail "orig_dst 443: $r"

# 3. a host outside the tier: an HTTP refusal on 80 ...
code=$(c blocked.test 80 http -o "$tmp/body" -D "$tmp/hdr" -w '%{http_code}')
[ "$code" = 403 ] || fail "http blocked: status $code"
grep -qi '^X-Sluice-Reason: above_ceiling' "$tmp/hdr" || fail "http blocked: $(cat "$tmp/hdr")"
grep -q '^sluice refused GET blocked.test:80 (above_ceiling)' "$tmp/body" ||
    fail "http blocked body: $(cat "$tmp/body")"
r=$(rec 'r["event"] == "decision" and r["host"] == "blocked.test" and r["port"] == 80')
echo "$r" | grep -q '"decision": "deny"' || fail "http blocked: $r"
echo "$r" | grep -q '"reason": "above_ceiling"' || fail "http blocked reason: $r"
echo "$r" | grep -q '"orig_dst": "198.51.100.10:80"' || fail "blocked orig_dst: $r"

# ... and a closed connection on 443: no bytes of the upstream's
c blocked.test 443 https > "$tmp/body" 2>/dev/null && fail "https blocked: curl succeeded"
[ -s "$tmp/body" ] && fail "https blocked: got $(cat "$tmp/body")"
r=$(rec 'r["event"] == "decision" and r["host"] == "blocked.test" and r["port"] == 443')
echo "$r" | grep -q '"decision": "deny"' || fail "https blocked: $r"
echo "$r" | grep -q '"reason": "above_ceiling"' || fail "https blocked reason: $r"
echo "$r" | grep -q '"sni": "blocked.test"' || fail "https blocked sni: $r"

# ... a ClientHello without SNI (curl sends none for an address) and
# bytes that are not TLS are closed too, with the reason logged
sb curl --noproxy '*' -sk --max-time 10 https://198.51.100.10/ >/dev/null &&
    fail "no SNI: went through"
r=$(rec 'r["event"] == "decision" and r.get("reason") == "sni_missing"')
echo "$r" | grep -q '"orig_dst": "198.51.100.10:443"' || fail "sni_missing: $r"
c allowed.test 443 http > "$tmp/body" 2>/dev/null && fail "not TLS: went through"
[ -s "$tmp/body" ] && fail "not TLS: got $(cat "$tmp/body")"
r=$(rec 'r["event"] == "decision" and r.get("reason") == "not_tls"')
echo "$r" | grep -q '"orig_dst": "198.51.100.10:443"' || fail "not_tls: $r"

# 4. the name decides, not the address the client chose: an allowed SNI
#    sent to another address reaches what the name resolves to, and the
#    record shows both
out=$(ADDR=203.0.113.9 c allowed.test 443 https) || fail "spoof: curl"
[ "$out" = "upstream tls allowed.test /p?x=1" ] || fail "spoof: $out"
r=$(rec 'r["event"] == "decision" and r.get("orig_dst") == "203.0.113.9:443"')
echo "$r" | grep -q '"dialed": "198.51.100.10"' || fail "spoof dialed: $r"

# 5. keep-alive: each request on a redirected connection is decided on
#    its own Host
#    (--next keeps curl's connection; -w counts the connections made)
sb curl --noproxy '*' -sS --max-time 10 \
    --resolve allowed.test:80:198.51.100.10 -o "$tmp/k1" \
    http://allowed.test/one --next --noproxy '*' -sS --max-time 10 \
    --resolve allowed.test:80:198.51.100.10 -H 'Host: blocked.test' \
    -o "$tmp/k2" -w '%{num_connects}' http://allowed.test/two \
    > "$tmp/nconn" 2>/dev/null
[ "$(cat "$tmp/nconn")" = 0 ] || fail "keep-alive: a new connection"
grep -q 'upstream http allowed.test /one' "$tmp/k1" || fail "keep-alive 1: $(cat "$tmp/k1")"
grep -q 'above_ceiling' "$tmp/k2" || fail "keep-alive 2: $(cat "$tmp/k2")"

# ... and a CONNECT sent to the redirected port 80 opens no tunnel to a
#    port the client never dialled: bad_target
code=$(sb curl --noproxy '*' -s --max-time 10 \
    --resolve allowed.test:80:198.51.100.10 -X CONNECT \
    --request-target allowed.test:22 -D "$tmp/hdr" -o /dev/null \
    -w '%{http_code}' http://allowed.test/)
[ "$code" = 400 ] || fail "CONNECT on 80: status $code"
grep -qi '^X-Sluice-Reason: bad_target' "$tmp/hdr" ||
    fail "CONNECT on 80: $(cat "$tmp/hdr")"

# 6. an unknown source is refused and logged
code=$(c allowed.test 80 http --interface 10.200.0.3 -o /dev/null -w '%{http_code}')
[ "$code" = 403 ] || fail "unknown source: status $code"
r=$(rec 'r["event"] == "decision" and r.get("reason") == "session_unknown"')
echo "$r" | grep -q '"transport": "transparent:10.200.0.3:' || fail "unknown: $r"
c allowed.test 443 https --interface 10.200.0.3 >/dev/null 2>&1 &&
    fail "unknown source: https went through"

# 7. IPv6: the ip6 redirect and IP6T_SO_ORIGINAL_DST; the name still
#    decides what is dialed (the upstream is IPv4 only)
out=$(ADDR='[2001:db8::10]' c allowed.test 80 http -6) || fail "v6 http: curl"
[ "$out" = "upstream http allowed.test /p?x=1" ] || fail "v6 http: $out"
r=$(rec 'r["event"] == "decision" and r.get("orig_dst") == "[2001:db8::10]:80"')
echo "$r" | grep -q '"session": "sb-6"' || fail "v6 session: $r"
echo "$r" | grep -q '"transport": "transparent:\[fd20::2\]:[0-9]*"' ||
    fail "v6 transport: $r"
echo "$r" | grep -q '"dialed": "198.51.100.10"' || fail "v6 dialed: $r"
# the sandbox resolved its router, the broker, through the input guard
nft list chain inet sluice input | grep -q \
    'icmpv6 type nd-neighbor-solicit counter packets [1-9]' ||
    fail "v6: no neighbour solicitation counted"
out=$(ADDR='[2001:db8::10]' c allowed.test 443 https -6) || fail "v6 https: curl"
[ "$out" = "upstream tls allowed.test /p?x=1" ] || fail "v6 https: $out"
ADDR='[2001:db8::10]' c blocked.test 443 https -6 >/dev/null 2>&1 &&
    fail "v6 https blocked: went through"
r=$(rec 'r["event"] == "decision" and r.get("orig_dst") == "[2001:db8::10]:443" and r["host"] == "blocked.test"')
echo "$r" | grep -q '"reason": "above_ceiling"' || fail "v6 blocked: $r"

# 8. a prompt through transparent mode, answered on the control API:
#    the chat's tier drops to off, ask.test is admitted by the ceiling
curl -s --max-time 5 --unix-socket "$tmp/run/control.sock" -X PATCH \
    -H 'Content-Type: application/json' -d '{"tier": "off"}' \
    -o "$tmp/patch" -w '%{http_code}' http://sluice/v1/sessions/sb-1 \
    > "$tmp/code"
[ "$(cat "$tmp/code")" = 200 ] || fail "patch tier: $(cat "$tmp/code" "$tmp/patch")"
curl -sN --max-time 60 --unix-socket "$tmp/run/control.sock" \
    http://sluice/v1/events > "$tmp/events" 2>/dev/null &
evpid=$!
i=0
until grep -q . "$tmp/events" 2>/dev/null || [ $i -gt 30 ]; do
	i=$((i + 1)); sleep 0.1
done
c ask.test 443 https > "$tmp/ask" 2>&1 &
cpid=$!
i=0
id=
until [ -n "$id" ]; do
	id=$(api http://sluice/v1/prompts | "$py" -c 'import json, sys
v = json.load(sys.stdin)
v = v.get("prompts", v) if isinstance(v, dict) else v
print(next((p["id"] for p in v if p["host"] == "ask.test"), ""))')
	i=$((i + 1)); [ $i -gt 50 ] && { kill "$cpid"; fail "no prompt"; }
	[ -z "$id" ] && sleep 0.1
done
api -X POST -H 'Content-Type: application/json' \
    -d '{"decision": "allow_once"}' "http://sluice/v1/prompts/$id" \
    >/dev/null || fail "answer"
wait "$cpid" || fail "prompted curl: $(cat "$tmp/ask")"
grep -q 'upstream tls ask.test /p?x=1' "$tmp/ask" || fail "prompted: $(cat "$tmp/ask")"
r=$(rec 'r["event"] == "decision" and r["host"] == "ask.test"')
echo "$r" | grep -q '"answer": "allow_once"' || fail "prompt record: $r"
echo "$r" | grep -q '"orig_dst": "198.51.100.10:443"' || fail "prompt orig_dst: $r"

# 9. a client that dials the transparent listener itself (nothing
#    redirected it: its original destination is the listener) is refused
#    before any decision, its Host never consulted (self_target)
for dst in 10.200.0.1 '[fd20::1]'; do
	code=$(sb curl --noproxy '*' -s --max-time 10 -H 'Host: allowed.test' \
	    -D "$tmp/hdr" -o "$tmp/body" -w '%{http_code}' \
	    "http://$dst:3129/p")
	[ "$code" = 400 ] || fail "direct $dst: status $code $(cat "$tmp/body")"
	grep -qi '^X-Sluice-Reason: self_target' "$tmp/hdr" ||
	    fail "direct $dst: $(cat "$tmp/hdr")"
	r=$(rec 'r["event"] == "decision" and r.get("orig_dst") == "'"$dst:3129"'"')
	echo "$r" | grep -q '"reason": "self_target"' || fail "direct $dst: $r"
	echo "$r" | grep -q '"host": null' || fail "direct $dst host: $r"
done

# 10. a ClientHello that hides its name (Encrypted Client Hello, or the
#     ESNI drafts' extension) is refused on the redirected TLS port: its
#     SNI is only the outer, public name (ech_refused).  The hello is
#     Python's with a GREASE ECH extension added
cat > "$tmp/ech.py" <<'PYEOF'
import socket, ssl, sys
def hello(name):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()
def with_ext(h, typ, body):
    p = 5 + 4 + 2 + 32
    p += 1 + h[p]
    p += 2 + int.from_bytes(h[p:p + 2], "big")
    p += 1 + h[p]
    ext = typ.to_bytes(2, "big") + len(body).to_bytes(2, "big") + body
    o = bytearray(h[:p + 2] + ext + h[p + 2:])
    for at, n in ((p, 2), (3, 2), (6, 3)):
        o[at:at + n] = (int.from_bytes(h[at:at + n], "big") +
                        len(ext)).to_bytes(n, "big")
    return bytes(o)
grease = (bytes([0, 0, 1, 0, 1, 0x5a, 0, 32]) + b"\x5a" * 32 +
          bytes([0, 64]) + b"\x5a" * 64)
s = socket.create_connection((sys.argv[1], 443), timeout=10)
s.sendall(with_ext(hello(sys.argv[2]), int(sys.argv[3], 16), grease))
# the first answer is enough: a ServerHello, or the close
try:
    got = s.recv(4096)
except ConnectionResetError:
    got = b""
print("bytes %d" % len(got))
PYEOF
# (sb-1's tier back to registries after 8.; the neighbouring code point
# is any extension: relayed, answered)
api -X PATCH -H 'Content-Type: application/json' -d '{"tier": "registries"}' \
    http://sluice/v1/sessions/sb-1 >/dev/null || fail "patch tier back"
out=$(sb "$py" "$tmp/ech.py" 198.51.100.10 allowed.test fe0c) ||
    fail "fe0c: client failed"
[ "$out" != "bytes 0" ] || fail "fe0c: no ServerHello"
for ext in fe0d ffce; do
	out=$(sb "$py" "$tmp/ech.py" 198.51.100.10 allowed.test "$ext") ||
	    fail "ech $ext: client failed"
	[ "$out" = "bytes 0" ] || fail "ech $ext: the upstream answered ($out)"
	r=$(rec 'r["event"] == "decision" and r.get("reason") == "ech_refused"')
	echo "$r" | grep -q '"sni": "allowed.test"' || fail "ech $ext: $r"
	echo "$r" | grep -q '"orig_dst": "198.51.100.10:443"' ||
	    fail "ech $ext orig_dst: $r"
done

echo "t_fw_transparent: ok"
