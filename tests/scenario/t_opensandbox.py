#!/usr/bin/env python3
"""sluice-execd's OpenSandbox-compatible API (DESIGN.md, "The
OpenSandbox-compatible API") with the official OpenSandbox JS SDK
(@alibaba-group/opensandbox from npm, unmodified) against the real
sluice-execd and sluiced, ns backend.

The SDK is installed with npm into a cache outside the clone
($SLUICE_NPM_CACHE, default /var/cache/sluice-npm), reused when there;
the case skips (77) only when npm cannot reach the registry and the
cache is empty (SLUICE_TEST_STRICT=1 makes that a failure).

Covered: opensandbox_chathub.mjs drives every tool ChatHub's Sandbox
uses through the SDK (create with the execd ready check, runCommand
foreground with exit code, stdout, stderr, the create's env and cwd;
background with getCommandOutput's logs and cursor and stopCommand;
writeFile by multipart upload, readFile, editFile by replace, listFiles,
search, exportFile with Range, file info, ChatHub's /tmp/workspace for
files and commands, the workspace's confinement,
a 501 for bash sessions, renew, list with state and metadata filters,
pause and resume, kill); the same sandbox is an ordinary one in the
native API meanwhile.  Then, with plain HTTP: a wrong key 401, another
tenant's key sees another tenant's sandbox as missing (404) and its
execd token is refused (401), an unknown image is refused with the
list, snapshots answer 501, and the config check refuses a non-loopback
plain listener.

The network policy (egress_sdk through the SDK with curl inside the
sandbox through sluiced, egress_raw as raw HTTP) and the port proxy
(ports_sdk: a background python3 -m http.server reached with the SDK's
endpoint, its header and a signed preview URL, and a WebSocket echo
server, os_ws_echo.py, through the signed URL with Node's WebSocket
client; ports_raw: refusals); gv_ports_sdk and gv_ports_raw
run both again on gVisor, where the sandbox's agent connects inside
(skip without a working runsc)."""

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, Fail, check, check_eq, log,  # noqa: E402
                     free_port, SRCDIR)
import t_execd  # noqa: E402

S = Suite("t_opensandbox", time_limit=400)

SDK_PKG = "@alibaba-group/opensandbox@0.1.11"
CACHE = os.environ.get("SLUICE_NPM_CACHE", "/var/cache/sluice-npm")
SDK = os.path.join(CACHE, "node_modules", "@alibaba-group", "opensandbox",
                   "dist", "index.js")
SCRIPT = os.path.join(SRCDIR, "tests", "scenario", "opensandbox_chathub.mjs")
KEY_A = "key-acme-0123456789abcdef"
KEY_B = "key-beta-0123456789abcdef"


def sdk():
    if os.path.exists(SDK):
        return SDK
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise Skip("node and npm are not installed")
    os.makedirs(CACHE, exist_ok=True)
    if not os.path.exists(os.path.join(CACHE, "package.json")):
        with open(os.path.join(CACHE, "package.json"), "w") as f:
            f.write('{"name": "sluice-npm-cache", "private": true}\n')
    r = subprocess.run(["npm", "install", "--no-audit", "--no-fund",
                        SDK_PKG], cwd=CACHE, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    if r.returncode != 0 or not os.path.exists(SDK):
        raise Skip("npm could not install %s: %s" % (
            SDK_PKG, r.stdout.decode(errors="replace")[-400:]))
    return SDK


def call(port, method, path, body=None, key=None, headers=None):
    h = dict(headers or {})
    if key is not None:
        h["OPEN-SANDBOX-API-KEY"] = key
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        h["Content-Type"] = "application/json"
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            b = r.read()
            return r.status, (json.loads(b) if b else None)
    except urllib.error.HTTPError as e:
        b = e.read()
        try:
            return e.code, json.loads(b)
        except ValueError:
            return e.code, b


def start(env, sluiced=None):
    """sluiced=None: t_execd's; else the sluiced config's overrides
    (with its upstream names), started here."""
    sdkp = sdk()
    port = free_port()
    keys = {}
    for name, k in (("a", KEY_A), ("b", KEY_B)):
        p = env.path("os-%s.key" % name)
        with open(p, "w") as f:
            f.write(k + "\n")
        os.chmod(p, 0o600)
        keys[name] = p
    over = {"opensandbox": {
        "listen": "127.0.0.1:%d" % port,
        "api_keys": [
            {"name": "chathub", "file": keys["a"], "tenant": "acme",
             "user": "chathub"},
            {"name": "other", "file": keys["b"], "tenant": "beta"}],
        "images": {"chathub-sandbox:1": "host"},
        "max_timeout_s": 3600}}
    if sluiced is None:
        d, ctl, x = t_execd.start(env, **over)
    else:
        t_execd.preflight()
        os.chmod(os.path.dirname(env.dir), 0o711)
        os.chmod(env.dir, 0o711)
        cfg = env.config(sessions=[], ceiling="public", **sluiced)
        d = env.sluiced(cfg)
        ctl = os.path.join(cfg["runtime_dir"], "control.sock")
        xo = {"backend": t_execd._backend["name"]} if \
            t_execd._backend["name"] else {}
        xo.update(over)
        x = t_execd.Execd(env, ctl, **xo).start()
    x.ctl = ctl
    return sdkp, port, x


def node(script, arg, x, timeout=120):
    # Node 20 has its WebSocket client behind a flag (22 without)
    flag = ["--experimental-websocket"] if subprocess.run(
        ["node", "--experimental-websocket", "-e", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode \
        == 0 else []
    r = subprocess.run(["node"] + flag + [os.path.join(
        SRCDIR, "tests", "scenario", script), json.dumps(arg)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    out = r.stdout.decode(errors="replace")
    log(out)
    if r.returncode != 0:
        raise Fail("%s failed (%d): %s\n%s" % (
            script, r.returncode, r.stderr.decode(errors="replace")[-3000:],
            x.stderr()))
    check('{"done":true}' in out, "%s ran to its end" % script)
    return out


@S.case
def chathub_sdk(env):
    """ChatHub's tools through the official JS SDK, unmodified."""
    sdkp, port, x = start(env)
    arg = json.dumps({"sdk": sdkp, "domain": "127.0.0.1:%d" % port,
                      "key": KEY_A, "image": "chathub-sandbox:1"})
    r = subprocess.run(["node", SCRIPT, arg], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=240)
    out = r.stdout.decode(errors="replace")
    log(out)
    if r.returncode != 0:
        raise Fail("the SDK script failed (%d): %s\n%s" % (
            r.returncode, r.stderr.decode(errors="replace")[-3000:],
            x.stderr()))
    check('"done":true' in out, "the script ran to its end")
    sid = [json.loads(l)["sandbox"] for l in out.splitlines()
           if l.startswith('{"sandbox"')][0]
    # the SDK's sandbox was an ordinary one: the native API and the audit
    # log know it (it is gone now: kill)
    r2 = x.app("GET", "/v1/sandboxes/%s" % sid)
    check_eq(r2.status, 404, "killed through the SDK: gone natively too")
    with open(env.path("xaudit/execd.jsonl")) as f:
        audit = f.read()
    check(sid in audit and '"opensandbox"' in audit,
          "the audit log has the SDK's create and delete")


@S.case
def egress_sdk(env):
    """The network policy through the SDK: networkPolicy at create,
    get/patch/delete of the rules, and what a command inside meets."""
    up = env.http_upstream()
    names = ("allowed.test", "denied.test", "other.test", "a.wild.test")
    sdkp, port, x = start(env, sluiced={
        "ports": env.ports(up.port),
        "dns": {"hosts": {n: ["127.0.0.1"] for n in names},
                "timeout_ms": 2000}})
    out = node("opensandbox_egress.mjs", {
        "sdk": sdkp, "domain": "127.0.0.1:%d" % port, "key": KEY_A,
        "image": "chathub-sandbox:1", "port": up.port}, x)
    sid = [json.loads(l)["sandbox"] for l in out.splitlines()
           if l.startswith('{"sandbox"')][0]
    # sluiced's log and the executor's audit say who changed what
    with open(env.path("conn.jsonl")) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    eg = [r for r in recs if r.get("action") == "session_egress"]
    check(len(eg) >= 3, "sluiced logged each change: %r" % eg[-1:])
    denied = [r for r in recs if r.get("reason") == "session_denied"]
    check(denied and denied[0].get("host") == "denied.test",
          "the refusal logged with its reason: %r" % denied[:1])
    with open(env.path("xaudit/execd.jsonl")) as f:
        audit = [json.loads(l) for l in f if l.strip()]
    check(any(a.get("action") == "egress" and a.get("sandbox") == sid
              for a in audit) or any(sid in json.dumps(a) and
                                     "egress" in json.dumps(a)
                                     for a in audit),
          "the executor's audit has the policy changes")


@S.case
def ports_sdk(env):
    """A python3 -m http.server in the sandbox through the port proxy,
    with the SDK's endpoints (token header, signed preview URL)."""
    sdkp, port, x = start(env)
    with open(os.path.join(SRCDIR, "tests", "scenario", "os_ws_echo.py")) as f:
        ws = f.read()
    out = node("opensandbox_ports.mjs", {
        "sdk": sdkp, "domain": "127.0.0.1:%d" % port, "key": KEY_A,
        "image": "chathub-sandbox:1", "wsServer": ws}, x)
    check('"step":"big"' in out, "the large file went through")
    check('"step":"websocket","n":2' in out, "the WebSocket went through")


@S.case
def ports_raw(env):
    """The port proxy as raw HTTP: another tenant's token, a bad port,
    a WebSocket upgrade, a sandbox without a listener."""
    sdkp, port, x = start(env)
    st, j = call(port, "POST", "/v1/sandboxes", {
        "image": {"uri": "chathub-sandbox:1"}, "entrypoint": ["sleep"],
        "resourceLimits": {"cpu": "1"}}, key=KEY_A)
    check_eq(st, 202, "create: %r" % (j,))
    sid = j["id"]
    st, ep = call(port, "GET", "/v1/sandboxes/%s/endpoints/9000" % sid,
                  key=KEY_A)
    check(st == 200 and ep["endpoint"].endswith("/sandboxes/%s/proxy/9000"
                                                 % sid), "endpoint %r" % ep)
    path = "/" + ep["endpoint"].split("/", 1)[1]
    st, j = call(port, "GET", path + "/x", headers=ep["headers"])
    check(st == 502 and j["code"] == "PORT_UNREACHABLE" and "9000" in
          j["message"], "no listener: %r" % (j,))
    st, j = call(port, "GET", path + "/x", headers={
        "OpenSandbox-Secure-Access": "0" * 64})
    check_eq(st, 401, "a wrong token")
    st, j = call(port, "GET", "/sandboxes/%s/proxy/70000/x" % sid,
                 headers=ep["headers"])
    check_eq(st, 400, "port out of range")
    st, j = call(port, "GET", path + "/x", headers=dict(
        ep["headers"], Upgrade="websocket", Connection="Upgrade"))
    check(st == 502 and j["code"] == "PORT_UNREACHABLE",
          "an upgrade to nothing: %r" % (j,))
    st, j = call(port, "POST", path + "/x", {}, headers=dict(
        ep["headers"], Upgrade="websocket", Connection="Upgrade"))
    check_eq(st, 400, "an upgrade is a GET")
    st, j = call(port, "GET", "/v1/sandboxes/%s/endpoints/9000?expires=1"
                 % sid, key=KEY_A)
    check(st == 400 and j["code"] == "INVALID_EXPIRES", "past: %r" % (j,))
    # another tenant's key does not get the endpoint
    st, j = call(port, "GET", "/v1/sandboxes/%s/endpoints/9000" % sid,
                 key=KEY_B)
    check_eq(st, 404, "another tenant's endpoint")
    st, _ = call(port, "DELETE", "/v1/sandboxes/%s" % sid, key=KEY_A)
    check_eq(st, 204, "delete")
    st, j = call(port, "GET", path + "/x", headers=ep["headers"])
    check_eq(st, 401, "a deleted sandbox's port")


@S.case
def egress_raw(env):
    """The egress routes as the SDK sends them: token, shapes, errors;
    sluiced's session carries the rules."""
    sdkp, port, x = start(env)
    st, j = call(port, "POST", "/v1/sandboxes", {
        "image": {"uri": "chathub-sandbox:1"}, "entrypoint": ["sleep"],
        "resourceLimits": {"cpu": "1"},
        "networkPolicy": {"egress": [{"action": "allow", "target": 7}]}},
        key=KEY_A)
    check(st == 400 and j["code"] == "INVALID_REQUEST_BODY",
          "a bad rule at create: %r" % (j,))
    st, j = call(port, "POST", "/v1/sandboxes", {
        "image": {"uri": "chathub-sandbox:1"}, "entrypoint": ["sleep"],
        "resourceLimits": {"cpu": "1"},
        "networkPolicy": {"defaultAction": "allow", "egress": [
            {"action": "deny", "target": "*.evil.test"}]}}, key=KEY_A)
    check_eq(st, 202, "create with a policy: %r" % (j,))
    sid = j["id"]
    n = x.app("GET", "/v1/sandboxes/%s" % sid)
    check_eq(n.json["network"]["tier"], "public", "defaultAction allow")
    sess = json.loads(t_execd.api_unix(x.ctl, "GET", "/v1/sessions/%s" %
                                       n.json["network"]["session"]).body)
    check_eq(sess["egress"], {"allow": [], "deny": ["*.evil.test"]},
             "sluiced's session has the rule")
    st, ep = call(port, "GET", "/v1/sandboxes/%s/endpoints/18080" % sid,
                  key=KEY_A)
    check(st == 200 and ep["endpoint"].endswith("/sandboxes/%s/egress" % sid)
          and "OPENSANDBOX-EGRESS-AUTH" in ep["headers"], "endpoint %r" % ep)
    path = "/" + ep["endpoint"].split("/", 1)[1] + "/policy"
    st, j = call(port, "GET", path)
    check_eq(st, 401, "no egress token")
    st, j = call(port, "GET", path, headers={
        "X-EXECD-ACCESS-TOKEN": ep["headers"]["OPENSANDBOX-EGRESS-AUTH"]})
    check_eq(st, 401, "the token under execd's header")
    h = ep["headers"]
    st, j = call(port, "GET", path, headers=h)
    check(st == 200 and j["policy"] == {"defaultAction": "allow", "egress": [
        {"action": "deny", "target": "*.evil.test"}]} and
        j["status"] == "ok" and j["mode"] == "rules", "GET: %r" % (j,))
    st, j = call(port, "PATCH", path, [], headers=h)
    check_eq(st, 400, "PATCH with no rule")
    st, j = call(port, "PATCH", path, {"action": "allow"}, headers=h)
    check_eq(st, 400, "PATCH with an object")
    st, j = call(port, "PUT", path, {"defaultAction": "deny"}, headers=h)
    check(st == 200 and j["mode"] == "deny_all", "PUT: %r" % (j,))
    n = x.app("GET", "/v1/sandboxes/%s" % sid)
    check_eq(n.json["network"]["tier"], "off", "defaultAction deny")
    sess = json.loads(t_execd.api_unix(x.ctl, "GET", "/v1/sessions/%s" %
                                       n.json["network"]["session"]).body)
    check_eq(sess["egress"], {"allow": [], "deny": []}, "rules cleared")
    st, j = call(port, "GET", "/" + ep["endpoint"].split("/", 1)[1] +
                 "/credential-vault", headers=h)
    check(st == 501 and j["code"] == "NOT_SUPPORTED", "vault: %r" % (j,))
    # another tenant's key does not reach it; the policy survives in
    # the record (GET after a restart of nothing: the record's)
    st, j = call(port, "GET", "/v1/sandboxes/%s/endpoints/18080" % sid,
                 key=KEY_B)
    check_eq(st, 404, "another tenant's endpoint")
    st, _ = call(port, "DELETE", "/v1/sandboxes/%s" % sid, key=KEY_A)
    check_eq(st, 204, "delete")


@S.case
def tenants(env):
    """Keys name tenants; wrong key 401; 501 and the image list."""
    sdkp, port, x = start(env)
    st, j = call(port, "GET", "/v1/sandboxes", key="wrong-key-0123456789")
    check_eq(st, 401, "a wrong key: %r" % (j,))
    check(j["code"] == "UNAUTHORIZED" and j["message"], "error shape")
    st, j = call(port, "GET", "/v1/sandboxes")
    check_eq(st, 401, "no key")
    st, j = call(port, "POST", "/v1/sandboxes", {
        "image": {"uri": "ubuntu:22.04"}, "entrypoint": ["sleep"],
        "resourceLimits": {"cpu": "1"}}, key=KEY_A)
    check(st == 400 and "chathub-sandbox:1" in j["message"],
          "an unknown image refused with the list: %r" % (j,))
    st, j = call(port, "POST", "/v1/sandboxes", {
        "image": {"uri": "chathub-sandbox:1"}, "timeout": 600,
        "entrypoint": ["tail", "-f", "/dev/null"],
        "resourceLimits": {"cpu": "500m", "memory": "512Mi"},
        "metadata": {"k": "v"}}, key=KEY_A)
    check_eq(st, 202, "create: %r" % (j,))
    sid = j["id"]
    check(j["status"]["state"] == "Running" and j["expiresAt"],
          "created running with an expiry: %r" % (j,))
    n = x.app("GET", "/v1/sandboxes/%s" % sid)
    check(n.status == 200 and n.json["tenant"] == "acme" and
          n.json["user"] == "chathub", "natively: %r" % (n,))
    # the other tenant's key: as if it did not exist
    st, j = call(port, "GET", "/v1/sandboxes/%s" % sid, key=KEY_B)
    check_eq(st, 404, "another tenant's sandbox")
    st, j = call(port, "DELETE", "/v1/sandboxes/%s" % sid, key=KEY_B)
    check_eq(st, 404, "another tenant's delete")
    st, j = call(port, "GET", "/v1/sandboxes", key=KEY_B)
    check(st == 200 and j["items"] == [], "another tenant lists none")
    st, j = call(port, "GET", "/sandboxes/%s/endpoints/44772" % sid,
                 key=KEY_A)
    check(st == 200 and j["endpoint"].endswith("/sandboxes/%s/execd" % sid)
          and len(j["headers"]["X-EXECD-ACCESS-TOKEN"]) == 64,
          "endpoint (no /v1 prefix): %r" % (j,))
    tok = j["headers"]["X-EXECD-ACCESS-TOKEN"]
    st, _ = call(port, "GET", "/sandboxes/%s/execd/ping" % sid,
                 headers={"X-EXECD-ACCESS-TOKEN": tok})
    check_eq(st, 200, "ping with the token")
    st, _ = call(port, "GET", "/sandboxes/%s/execd/ping" % sid,
                 headers={"X-EXECD-ACCESS-TOKEN": "0" * 64})
    check_eq(st, 401, "a wrong execd token")
    # ids are per tenant: tenant beta makes a sandbox of the same id
    # (natively) and asks for its endpoint with its own key.  Its token
    # must reach its own sandbox only, never acme's (the token and this
    # API's records were once keyed by the bare id)
    r = x.app("POST", "/v1/sandboxes", {"id": sid, "tenant": "beta",
                                        "user": "bob",
                                        "network": {"tier": "off"}},
              timeout=120)
    check_eq(r.status, 201, "beta's sandbox of the same id: %r" % (r,))
    r = x.app("PUT", "/v1/sandboxes/%s/files/only-beta.txt?tenant=beta" %
              sid, raw=b"b")
    check(r.status in (200, 201, 204), "a file in beta's: %r" % (r,))
    st, j = call(port, "GET", "/sandboxes/%s/endpoints/44772" % sid,
                 key=KEY_B)
    check_eq(st, 200, "beta's endpoint: %r" % (j,))
    tok_b = j["headers"]["X-EXECD-ACCESS-TOKEN"]
    check(tok_b != tok, "beta's token differs from acme's")
    info = "/sandboxes/%s/execd/files/info?path=/workspace/only-beta.txt" % sid
    st, _ = call(port, "GET", info, headers={"X-EXECD-ACCESS-TOKEN": tok_b})
    check_eq(st, 200, "beta's token reaches beta's sandbox")
    st, _ = call(port, "GET", info, headers={"X-EXECD-ACCESS-TOKEN": tok})
    check(st == 404, "acme's token reached beta's file (%d)" % st)
    st, j = call(port, "PATCH", "/v1/sandboxes/%s/metadata" % sid,
                 {"k": "beta's"}, key=KEY_B)
    check_eq(st, 200, "beta's metadata")
    st, j = call(port, "GET", "/v1/sandboxes/%s" % sid, key=KEY_A)
    check(st == 200 and j["metadata"] == {"k": "v"},
          "acme's record kept beside beta's: %r" % (j,))
    r = x.app("DELETE", "/v1/sandboxes/%s?tenant=beta&archive=discard" % sid)
    check(r.status in (200, 204), "beta's sandbox deleted: %r" % (r,))
    st, j = call(port, "POST", "/v1/sandboxes/%s/snapshots" % sid, {},
                 key=KEY_A)
    check(st == 501 and "snapshot" in j["message"], "snapshots: %r" % (j,))
    st, j = call(port, "GET", "/sandboxes/%s/execd/code/contexts" % sid,
                 headers={"X-EXECD-ACCESS-TOKEN": tok})
    check(st == 501 and j["code"] == "NOT_SUPPORTED", "code: %r" % (j,))
    st, j = call(port, "PATCH", "/v1/sandboxes/%s/metadata" % sid,
                 {"k": None, "n": "2"}, key=KEY_A)
    check(st == 200 and j["metadata"] == {"n": "2"}, "merge patch: %r" % (j,))
    st, _ = call(port, "DELETE", "/v1/sandboxes/%s" % sid, key=KEY_A)
    check_eq(st, 204, "delete")
    st, _ = call(port, "GET", "/v1/sandboxes/%s" % sid, key=KEY_A)
    check_eq(st, 404, "deleted")


@S.case
def config_check(env):
    """--check-config: plain HTTP off loopback is refused, with why."""
    t_execd.preflight()
    p = env.path("os.key")
    with open(p, "w") as f:
        f.write(KEY_A + "\n")
    conf = env.path("bad.json")
    with open(conf, "w") as f:
        json.dump({"opensandbox": {"listen": "0.0.0.0:8090",
                   "api_keys": [{"name": "a", "file": p, "tenant": "t"}],
                   "images": {"*": "base"}}}, f)
    r = subprocess.run([t_execd.EXECD, "-c", conf, "--check-config"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode()
    check(r.returncode != 0 and "opensandbox.listen" in out and
          "plain_http" in out, "refused with the key and why: %r" % out)
    # workdir: a path that can stand for /workspace, or none
    for bad in ("/workspace/x", "tmp/w", "/tmp/../w", "/w", "/tmp/w/"):
        with open(conf, "w") as f:
            json.dump({"opensandbox": {"listen": "127.0.0.1:8090",
                       "workdir": bad, "api_keys": [
                           {"name": "a", "file": p, "tenant": "t"}],
                       "images": {"*": "base"}}}, f)
        r = subprocess.run([t_execd.EXECD, "-c", conf, "--check-config"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = r.stdout.decode()
        check(r.returncode != 0 and "opensandbox.workdir" in out,
              "workdir %r refused: %r" % (bad, out))
    with open(conf, "w") as f:
        json.dump({"opensandbox": {"listen": "127.0.0.1:8090", "api_keys": [
            {"name": "a", "file": p, "tenant": "t"}],
            "images": {"*": "base"}}}, f)
    r = subprocess.run([t_execd.EXECD, "-c", conf, "--print-config"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(r.returncode == 0 and json.loads(r.stdout)["opensandbox"][
        "workdir"] == "/tmp/workspace", "the default workdir printed: %r"
        % r.stdout[-400:])


# "gv_": the case's directory is in the session socket's path, which
# sun_path bounds
for _fn in (ports_sdk, ports_raw):
    t_execd.on_gvisor(_fn, S, "gv_" + _fn.__name__)


if __name__ == "__main__":
    S.main()
