#!/usr/bin/env python3
"""Real package-manager clients through sluiced: pip installs a wheel from
a PyPI-like simple index on loopback, over plain HTTP (absolute-form
forwarding) and over HTTPS (CONNECT with the SNI check), and a registry
outside the chat's tier is refused with a reason pip shows."""

import functools
import http.server
import os
import ssl
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, Fail, check, check_eq, decisions,  # noqa: E402
                     free_port, log)
# the demo's registry is the one place the test wheel is made
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "demo"))
from registry import PKG, make_index  # noqa: E402

S = Suite("t_clients", time_limit=400)

class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def serve(env, root, tls=None):
    handler = functools.partial(Quiet, directory=root)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*tls)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True)
    t.start()

    def close():
        srv.shutdown()
        srv.server_close()
    env.closers.append(close)
    return srv.server_address[1]


def pip_available():
    r = subprocess.run([sys.executable, "-m", "pip", "--version"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Skip("pip is not installed for %s" % sys.executable)


def pip_install(env, proxy, index, extra=()):
    target = env.path("site-%d" % free_port())
    cmd = [sys.executable, "-m", "pip", "install", "--no-cache-dir",
           "--disable-pip-version-check", "--no-input", "--retries", "0",
           "--timeout", "15", "--proxy", proxy, "--index-url", index,
           "--target", target] + list(extra) + [PKG]
    # the machine's pip settings (a CA bundle, local wheel folders) must
    # not decide what this test sees
    envv = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")
            and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    envv["PIP_CONFIG_FILE"] = os.devnull
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=120, env=envv)
    return r, target


def setup(env, port, tier="registries", registries=("pypi.test",), sni=()):
    cfg = env.config(
        sessions=[{"id": "pip", "tenant": "acme", "user": "alice",
                   "tier": tier, "source": "127.0.0.1"}],
        ceiling="registries",
        registries=list(registries),
        ports={"registries": [443, 80, port], "public": [443, 80]},
        allow_cidrs=["127.0.0.1/32"],
        dns={"hosts": {"pypi.test": ["127.0.0.1"],
                       "other.test": ["127.0.0.1"]}},
        tls={"sni_ports": [443] + list(sni)})
    return env.sluiced(cfg)


@S.case
def pip_over_http(env):
    pip_available()
    root = env.path("www")
    make_index(root)
    port = serve(env, root)
    d = setup(env, port)
    proxy = "http://127.0.0.1:%d" % d.tcp_addr[1]
    r, target = pip_install(env, proxy, "http://pypi.test:%d/simple/" % port,
                            extra=["--trusted-host", "pypi.test"])
    check(r.returncode == 0, "pip install failed: %s",
          r.stderr.decode(errors="replace")[-800:])
    check(os.path.exists(os.path.join(target, PKG, "__init__.py")),
          "package not installed in %s", target)
    allowed = decisions(d.log_path, decision="allow")
    check(len(allowed) >= 2, "allow records: %d", len(allowed))
    check(all(a.get("host") == "pypi.test" and a.get("rule") == "registries"
              for a in allowed), "allow records name pypi.test: %r", allowed)


@S.case
def pip_over_https_connect(env):
    pip_available()
    root = env.path("www")
    make_index(root)
    crt, key = env.cert(("pypi.test",))
    port = serve(env, root, tls=(crt, key))
    d = setup(env, port, sni=(port,))
    proxy = "http://127.0.0.1:%d" % d.tcp_addr[1]
    r, target = pip_install(env, proxy, "https://pypi.test:%d/simple/" % port,
                            extra=["--cert", crt])
    check(r.returncode == 0, "pip install over CONNECT failed: %s %s\n%s",
          r.stdout.decode(errors="replace")[-1500:],
          r.stderr.decode(errors="replace")[-800:], open(d.log_path).read()[-1500:])
    check(os.path.exists(os.path.join(target, PKG, "__init__.py")),
          "package not installed")
    allowed = decisions(d.log_path, decision="allow")
    check(allowed and all(a.get("method") == "CONNECT" for a in allowed),
          "CONNECT allow records: %r", allowed)


@S.case
def pip_refused_outside_tier(env):
    pip_available()
    root = env.path("www")
    make_index(root)
    port = serve(env, root)
    d = setup(env, port)
    proxy = "http://127.0.0.1:%d" % d.tcp_addr[1]
    r, target = pip_install(env, proxy, "http://other.test:%d/simple/" % port,
                            extra=["--trusted-host", "other.test"])
    check(r.returncode != 0, "pip installed from a host outside the tier")
    check(not os.path.exists(os.path.join(target, PKG)), "package installed")
    denied = decisions(d.log_path, decision="deny")
    check(denied and denied[0].get("reason") == "above_ceiling",
          "deny record: %r", denied)


if __name__ == "__main__":
    S.main()
