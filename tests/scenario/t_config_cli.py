#!/usr/bin/env python3
"""Command line: --check-config (exit 0, or FILE:LINE:COL: path: message
and exit 1), --print-config [-c FILE], and a start with a bad file.

The --print-config output of the defaults and of a configuration that
sets every key is pinned byte for byte by the golden files
tests/scenario/golden/print_config_defaults.json and
print_config_every_key.json; SLUICE_UPDATE_GOLDEN=1 (e.g.
SLUICE_UPDATE_GOLDEN=1 make check TESTS=tests/scenario/t_config_cli.py)
rewrites them in the source tree.  A key added to the schema must be
added to EVERY_KEY below, with a value other than its default."""

import difflib
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, check, check_eq, log, sluiced_path, SRCDIR  # noqa: E402

S = Suite("t_config_cli")

GOLDEN_DIR = os.path.join(SRCDIR, "tests", "scenario", "golden")
UPDATE = os.environ.get("SLUICE_UPDATE_GOLDEN") == "1"

# Every key of sluiced.json(5), none at its default; the sessions and
# tokens between them give every key of a session and of a token.
EVERY_KEY = {
    "runtime_dir": "/tmp/sluice-every",
    "state_file": "/tmp/sluice-every/state.json",
    "user": "nobody",
    "ceiling": "registries",
    "tenants": {"acme": {"ceiling": "public"}, "b.corp": {"ceiling": "off"}},
    "listen": {"tcp": ["127.0.0.1:3128", "[::1]:3129"],
               "transparent": ["0.0.0.0:3140", "[::]:3140"],
               "vsock_port": 4000, "socket_mode": "0640",
               "socket_group": "grp",
               "socket_prefixes": ["/run/vm", "/srv/firecracker"]},
    "sessions": [{"id": "a", "tenant": "acme", "user": "alice",
                  "tier": "public", "socket": "/tmp/sluice-every/a.sock"},
                 {"id": "b", "source": "::FFFF:10.0.0.1",
                  "tier": "registries"},
                 {"id": "c", "vsock_cid": 9},
                 {"id": "d"}],
    "registries": ["pypi.org", "*.crates.io:8443"],
    "ports": {"registries": [443], "public": [443, 80, 8080]},
    "allow_cidrs": ["10.1.0.0/16", "fd00::/8"],
    "deny_cidrs": ["203.0.113.7"],
    "deny_hosts": ["bad.example", "*.evil.example"],
    "dns": {"servers": ["127.0.0.1", "[::1]:5353", "10.0.0.1:53"],
            "hosts": {"Mirror.Example.": ["10.1.2.3", "::1"],
                      "b.example": ["1.2.3.4"]},
            "timeout_ms": 1234},
    "log": {"path": "/tmp/sluice-every/log.jsonl", "refusals_per_s": 5,
            "refusal_burst": 9, "min_free_bytes": 1048576,
            "mac_key_file": "/tmp/sluice-every/mac.key"},
    "prompt": {"timeout_s": 45, "deny_quiet_s": 5},
    "events": {"ring": 64, "max_pending": 8192, "heartbeat_s": 7},
    "limits": {"max_head": 20000, "max_line": 3000, "max_headers": 77,
               "max_conns_per_tenant": 900, "pressure_pct": 60,
               "fd_reserve": 100, "max_grants_per_session": 50,
               "max_refusals_per_conn": 7,
               "head_timeout_ms": 2500, "idle_timeout_s": 120,
               "connect_timeout_ms": 4000, "max_conns_per_session": 9,
               "max_conns_total": 99, "tunnel_buffer": 70000,
               "drain_timeout_s": 0},
    "tls": {"sni_check": False, "sni_ports": [443, 8443],
            "allow_ech": True, "plain_http_ports": [80, 8080],
            "sni_timeout_ms": 900},
    "control": {"socket": "/tmp/sluice-every/ctl.sock", "socket_mode": 384,
                "socket_group": "wheel",
                "admin_uids": [1000], "admin_gids": [10, 11],
                "app_uids": [1001], "app_gids": [13],
                "auditor_uids": [1002, 4294967294], "auditor_gids": [12],
                "tcp": "127.0.0.1:9443", "tls_cert": "/etc/s/c.pem",
                "tls_key": "/etc/s/k.pem", "client_ca": "/etc/s/ca.pem",
                "tokens": [{"name": "ops", "role": "admin",
                            "token_file": "/etc/s/ops"},
                           {"name": "chat", "role": "app",
                            "token_file": "/etc/s/chat", "tenant": "acme"},
                           {"name": "aud", "role": "auditor",
                            "token_file": "/etc/s/aud"}],
                "max_body": 4096, "max_conns": 32,
                "max_conns_per_peer": 4, "head_timeout_ms": 7000},
    "webhook": {"url": "HTTPS://Hooks.Example:8443/x?y=1",
                "secret_file": "/etc/s/hook", "ca_file": "/etc/s/hca.pem",
                "timeout_ms": 700,
                "hosts": {"hooks.example": ["127.0.0.1", "::1"]}},
    "firewall": {"enabled": True, "table": "t_1", "uid": 4242,
                 "sandbox_subnets": ["10.77.0.0/16", "fd77::/64"],
                 "sandbox_interfaces": ["br0", "tap*"],
                 "broker_ports": [3128, 3129]},
    "inspect": {"hosts": ["registry.npmjs.org", "*.githubusercontent.com"],
                "ca_cert": "/etc/sluice/inspect-ca.pem",
                "ca_key": "/etc/sluice/inspect-ca.key",
                "upstream_ca_file": "/etc/sluice/upstream-ca.pem",
                "leaf_cache": 64, "leaf_days": 7},
    "rules": [{"name": "npm-ro", "hosts": ["registry.npmjs.org"],
               "methods": ["GET", "HEAD"], "action": "allow"},
              {"hosts": ["*.githubusercontent.com", "plain.example:80"],
               "paths": ["/*/git-receive-pack"], "action": "prompt"}],
    "credentials": {"file": "/etc/sluice/credentials.json"},
}


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


def print_config_bytes(env, cfg):
    """--print-config's stdout as bytes: the defaults when cfg is None."""
    if cfg is not None:
        args = ["--print-config", "-c", write(env, "c.json", cfg)]
    elif os.path.exists("/etc/sluice/sluiced.json"):
        args = ["--print-config", "-c", write(env, "empty.json", "{}")]
    else:
        args = ["--print-config"]
    r = subprocess.run([sluiced_path()] + args, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=20)
    check_eq(r.returncode, 0, "exit status (stderr %r)" % r.stderr)
    return r.stdout


def golden_compare(name, got):
    path = os.path.join(GOLDEN_DIR, name)
    if UPDATE:
        with open(path + ".tmp", "wb") as f:
            f.write(got)
        os.rename(path + ".tmp", path)
        log("wrote %s" % path)
        return
    try:
        with open(path, "rb") as f:
            want = f.read()
    except FileNotFoundError:
        raise AssertionError("%s missing: run with SLUICE_UPDATE_GOLDEN=1 "
                             "to write it" % path)
    if got != want:
        diff = difflib.unified_diff(
            want.decode("utf-8", "replace").splitlines(),
            got.decode("utf-8", "replace").splitlines(),
            "golden/" + name, "--print-config", lineterm="")
        raise AssertionError("--print-config differs from %s "
                             "(SLUICE_UPDATE_GOLDEN=1 rewrites it):\n%s"
                             % (os.path.relpath(path, SRCDIR),
                                "\n".join(diff)))


def unset_keys(defaults, cfg, at=""):
    """Keys of the defaults' dump that cfg leaves out or sets to their
    default; objects of fixed keys (non-empty in the defaults) are
    followed, anything else is one value."""
    bad = []
    for k, dv in defaults.items():
        p = at + k
        if k not in cfg:
            bad.append(p + " (missing)")
        elif isinstance(dv, dict) and dv:
            if isinstance(cfg[k], dict):
                bad += unset_keys(dv, cfg[k], p + ".")
            else:
                bad.append(p + " (not an object)")
        elif cfg[k] == dv:
            bad.append(p + " (at its default)")
    return bad


@S.case
def print_config_golden_defaults(env):
    golden_compare("print_config_defaults.json", print_config_bytes(env, None))


@S.case
def print_config_golden_every_key(env):
    defaults = json.loads(print_config_bytes(env, None))
    bad = unset_keys(defaults, EVERY_KEY)
    check(not bad, "EVERY_KEY does not set every key: %s", ", ".join(bad))
    golden_compare("print_config_every_key.json",
                   print_config_bytes(env, json.dumps(EVERY_KEY, indent=1)))


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
