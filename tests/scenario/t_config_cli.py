#!/usr/bin/env python3
"""Command line: --check-config (exit 0, or FILE:LINE:COL: path: message
and exit 1), --print-config [-c FILE], and a start with a bad file."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, check, check_eq, sluiced_path  # noqa: E402

S = Suite("t_config_cli")


def run(args, timeout=20):
    r = subprocess.run([sluiced_path()] + args, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return r.returncode, r.stdout.decode("utf-8", "replace"), \
        r.stderr.decode("utf-8", "replace")


def write(env, name, text):
    p = env.path(name)
    with open(p, "w") as f:
        f.write(text)
    return p


def check_error(env, text, line, path_re, what):
    p = write(env, "bad.json", text)
    rc, out, err = run(["--check-config", p])
    check_eq(rc, 1, "%s: exit status (stderr %r)" % (what, err))
    both = out + err
    pat = r"%s:%d:(\d+): %s: \S" % (re.escape(p), line, path_re)
    m = re.search(pat, both)
    check(m, "%s: no '%s' in %r", what, pat, both)
    return int(m.group(1))


@S.case
def check_config_ok(env):
    p = write(env, "ok.json", json.dumps(env.config(), indent=2))
    rc, out, err = run(["--check-config", p])
    check_eq(rc, 0, "exit status (stderr %r)" % err)
    # the empty object is a valid config: every key has a default (the
    # default user, "sluice", must exist: see check_config_user)
    p = write(env, "empty.json", '{"user": "nobody"}\n')
    rc, out, err = run(["--check-config", p])
    check_eq(rc, 0, "empty config (stderr %r)" % err)


@S.case
def check_config_user(env):
    """A user that does not exist fails the check, as it would fail the
    start, and the message says how to make it."""
    p = write(env, "nouser.json", '{"user": "sluice-no-such-user"}\n')
    rc, out, err = run(["--check-config", p])
    check_eq(rc, 1, "missing user: exit status")
    check('user: "sluice-no-such-user" does not exist' in err and
          "useradd --system" in err and "sysusers.d" in err,
          "missing user message %r", err)
    check("configuration OK" not in out, "said OK: %r", out)
    p = write(env, "rootuser.json", '{"user": "root"}\n')
    rc, out, err = run(["--check-config", p])
    check_eq(rc, 0, "user root (stderr %r)" % err)


@S.case
def check_config_type_error(env):
    text = ('{\n'
            '  "ceiling": "public",\n'
            '  "dns": { "timeout_ms": "soon" }\n'
            '}\n')
    col = check_error(env, text, 3, r"dns\.timeout_ms", "string for an integer")
    check(col >= 1, "column %d", col)
    # the column points at the value (or its key) on that line
    line = text.splitlines()[2]
    check(col <= len(line) + 1, "column %d beyond the line", col)


@S.case
def check_config_bad_value(env):
    check_error(env, '{\n  "ceiling": "wide-open"\n}\n', 2, r"ceiling", "bad tier")
    check_error(env, '{\n  "listen": {\n    "tcp": ["127.0.0.1:99999"]\n  }\n}\n', 3,
                r"listen\.tcp(\[0\]|\.0)?", "bad port")
    check_error(env, '{\n  "allow_cidrs": ["10.0.0.0/33"]\n}\n', 2,
                r"allow_cidrs(\[0\]|\.0)?", "bad CIDR")


@S.case
def check_config_unknown_key(env):
    p = write(env, "bad.json", '{\n  "ceiling": "off",\n  "ceilling": "public"\n}\n')
    rc, out, err = run(["--check-config", p])
    check_eq(rc, 1, "exit status")
    check(re.search(r"%s:3:\d+: ceilling: \S" % re.escape(p), out + err),
          "unknown key not reported at 3:col: %r", out + err)


@S.case
def check_config_session_error(env):
    text = ('{\n  "sessions": [\n'
            '    { "id": "ok", "tier": "public", "source": "127.0.0.5" },\n'
            '    { "id": "bad", "tier": "public", "source": "127.1" }\n'
            '  ]\n}\n')
    check_error(env, text, 4, r"sessions(\[1\]|\.1)\.source", "bad source")


@S.case
def check_config_syntax_error(env):
    text = '{\n  "ceiling": "off"\n  "log": {}\n}\n'      # missing comma
    p = write(env, "bad.json", text)
    rc, out, err = run(["--check-config", p])
    check_eq(rc, 1, "exit status")
    check(re.search(r"%s:3:\d+: " % re.escape(p), out + err),
          "syntax error not reported at line 3: %r", out + err)


@S.case
def check_config_missing_file(env):
    p = env.path("nope.json")
    rc, out, err = run(["--check-config", p])
    check_eq(rc, 1, "exit status for a missing file")
    check(p in out + err, "message does not name the file: %r", out + err)


@S.case
def print_config_file(env):
    cfg = env.config()
    cfg["limits"] = {"max_head": 12345}
    p = write(env, "c.json", json.dumps(cfg))
    rc, out, err = run(["--print-config", "-c", p])
    check_eq(rc, 0, "exit status (stderr %r)" % err)
    try:
        doc = json.loads(out)
    except ValueError as e:
        raise AssertionError("--print-config output is not JSON: %s: %r" % (e, out[:300]))
    check_eq(doc.get("ceiling"), "public", "ceiling")
    check_eq(doc.get("listen", {}).get("tcp"), cfg["listen"]["tcp"], "listen.tcp")
    check_eq(doc.get("limits", {}).get("max_head"), 12345, "limits.max_head")
    # defaults filled in for keys the file left out
    for k in ("max_line", "max_headers", "head_timeout_ms", "idle_timeout_s",
              "connect_timeout_ms", "max_conns_per_session", "max_conns_total",
              "tunnel_buffer", "drain_timeout_s"):
        check(k in doc.get("limits", {}), "limits.%s missing from --print-config", k)
    check("tls" in doc and "sni_ports" in doc["tls"], "tls.sni_ports missing: %r",
          doc.get("tls"))
    check_eq(doc["dns"]["hosts"], {}, "dns.hosts")
    # the printed config is itself a valid config
    p2 = write(env, "printed.json", out)
    rc, _, err = run(["--check-config", p2])
    check_eq(rc, 0, "printed config does not check (stderr %r)" % err)


@S.case
def print_config_defaults(env):
    if os.path.exists("/etc/sluice/sluiced.json"):
        p = write(env, "empty.json", "{}")
        args = ["--print-config", "-c", p]
    else:
        args = ["--print-config"]
    rc, out, err = run(args)
    check_eq(rc, 0, "exit status (stderr %r)" % err)
    doc = json.loads(out)
    check_eq(doc.get("ceiling"), "off", "default ceiling")
    check_eq(doc.get("runtime_dir"), "/run/sluice", "default runtime_dir")
    check_eq(sorted(doc.get("ports", {}).get("public", [])), [80, 443], "public ports")
    check_eq(doc.get("tls", {}).get("sni_ports"), [443], "default tls.sni_ports")


@S.case
def start_with_bad_config(env):
    text = '{\n  "ceiling": "off",\n  "dns": { "timeout_ms": -5 }\n}\n'
    p = write(env, "bad.json", text)
    rc, out, err = run(["-c", p], timeout=10)
    check(rc != 0, "sluiced started with a bad config")
    check("ready" not in err, "printed ready with a bad config")
    check(re.search(r"%s:3:\d+: dns\.timeout_ms: \S" % re.escape(p), err),
          "start error not in FILE:LINE:COL form: %r", err)


if __name__ == "__main__":
    S.main()
