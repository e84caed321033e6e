#!/usr/bin/env python3
"""sluice-execd's warm pools (issue 26 point 1), with the real sluiced
and real ns sandboxes, driven as an unprivileged app (t_execd.py's
client):

- "pools" fills in the background (sluice_execd_pool_ready reaches the
  size); the waiting sandboxes are nobody's: not listed, not reachable
  by id, no broker session in sluiced;
- a create asking for a pool's backend, profile and limits takes one:
  "pooled": true, its tenant, user, tier and limits the caller's, its
  broker session in sluiced the caller's tenant and user (the socket in
  the sandbox's /run/sluice), an empty workspace owned by the sandbox
  user, no process of a command in it; a command runs; the pool fills
  again (pool_taken_total, pool_filled_total);
- a create with other limits, or for a pool of size 0, is a cold create
  ("pooled": false) and works;
- a reload that changes the pools drops the waiting sandboxes and fills
  the new ones; a node's drain (PUT /v1/node) drops them and fills none
  until it ends;
- SIGTERM drops every waiting sandbox (no pool-* directory, mount,
  process or cgroup left), the taken one is adopted by the next start
  with its tenant; a SIGKILLed daemon's waiting sandboxes are dropped by
  the next start;
- on gVisor too: the take's session socket is seen inside the sentry and
  the proxy answers through it.

No timing is asserted (the bench measures it).  Skips (77) without
root or user namespaces."""

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, check, check_eq, log, wait_until  # noqa: E402
import t_execd as X  # noqa: E402
import execdlib  # noqa: E402

S = Suite("t_execd_pool", time_limit=420)

POOL_LIMITS = {"disk_mb": 16, "inodes": 256}
# through the sandbox's proxy (HTTP_PROXY): sluiced answers
CURL = ("curl -s -o /dev/null -w %{http_code} --max-time 20 "
        "http://example.invalid/")


def metrics(x):
    r = x.auditor("GET", "/v1/metrics")
    check_eq(r.status, 200, "metrics")
    out = {}
    for ln in r.body.decode().split("\n"):
        if ln.startswith("sluice_execd_pool"):
            k, v = ln.rsplit(" ", 1)
            out[k] = int(v)
    return out


def ready(x, pool=0):
    for k, v in metrics(x).items():
        if k.startswith("sluice_execd_pool_ready{pool=\"%d\"" % pool):
            return v
    return None


def pool_dirs(x):
    return [n for n in x.sandboxes() if n.startswith("pool-")]


def session(ctl, sid):
    r = X.root_call(ctl, "GET", "/v1/sessions/%s" % sid)
    return r.json if r.status == 200 else r.status


@S.case
def pool_fill_take_refill(env):
    d, ctl, x = X.start(env, pools=[
        {"size": 2, "limits": POOL_LIMITS},
        {"size": 0, "limits": {"disk_mb": 24}}], pool_fills=1)
    wait_until(lambda: ready(x) == 2, 60, what="the pool filled")
    m = metrics(x)
    check_eq(m["sluice_execd_pool_filled_total"], 2, "two made")
    check_eq(m['sluice_execd_pool_size{pool="0",backend="ns",'
               'profile="host"}'], 2, "size shown")
    # nobody's: not listed, not reachable, no broker session
    check_eq(x.app("GET", "/v1/sandboxes").json["sandboxes"], [],
             "pool sandboxes not listed")
    waiting = pool_dirs(x)
    check_eq(len(waiting), 2, "two pool directories: %r" % waiting)
    for k in waiting:
        check_eq(x.app("GET", "/v1/sandboxes/%s" % k).status, 404,
                 "a pool sandbox is no sandbox of the API")
        check_eq(session(ctl, k), 404, "no broker session while waiting")
    # taken: bound to the caller
    b = X.create(x, "p1", user="alice", limits=POOL_LIMITS,
                 network={"tier": "registries"})
    check_eq(b["pooled"], True, "pooled: %r" % b)
    check_eq((b["tenant"], b["user"], b["network"]["tier"],
              b["limits"]["disk_mb"], b["limits"]["inodes"]),
             ("acme", "alice", "registries", 16, 256), "bound")
    key = b["network"]["session"]
    check(key in waiting, "one of the waiting ones: %s" % key)
    s = session(ctl, key)
    check(isinstance(s, dict), "its broker session: %r" % s)
    check_eq((s["tenant"], s["user"], s["tier"]),
             ("acme", "alice", "registries"), "session bound")
    with open(os.path.join(x.state_dir, key, "record.json")) as f:
        rec = json.load(f)
    check_eq((rec["tenant"], rec["user"], rec["id"]),
             ("acme", "alice", "p1"), "record bound")
    with open(os.path.join(x.state_dir, key, "execd.json")) as f:
        check("pool" not in json.load(f), "no longer marked a pool's")
    g = x.app("GET", "/v1/sandboxes/p1")
    check_eq((g.status, g.json["pooled"], g.json["tenant"]),
             (200, True, "acme"), "GET: %r" % g)
    o = X.ex(x, "p1", {"shell": "echo /workspace/* /workspace/.*; "
                       "id -u; test -S /run/sluice/proxy.sock && "
                       "echo sock; ps -e -o comm= | sort | tr '\\n' ' '; "
                       "echo; " + CURL}, timeout=60)
    lines = o["stdout"].split("\n")
    check_eq(lines[0].split(), ["/workspace/*", "/workspace/.",
                                "/workspace/.."], "empty workspace: %r" % o)
    check_eq(lines[1:3], ["1000", "sock"], "user and socket: %r" % o)
    # the proxy answers through the session made at the take (sluiced's
    # policy refuses the name: any HTTP status, not 000)
    check(lines[4] not in ("", "000"), "sluiced reached: %r" % o)
    # nothing but the holder, the shim, the holder's agent (sbx-agent:
    # this command's worker, the one waiting for the next and the
    # process it made ahead, none of them a command) and this command's
    # own
    procs = set(lines[3].split())
    check(procs <= {"sbx-init", "sluice-shim", "sbx-agent", "sh", "ps",
                    "sort", "tr"},
          "no process of another command: %r" % procs)
    # the other tenant gets the other one, just as fresh
    b2 = X.create(x, "p2", tenant="beta", user="bob", limits=POOL_LIMITS)
    check_eq((b2["pooled"], b2["tenant"]), (True, "beta"), "beta's")
    check(b2["network"]["session"] != key, "another sandbox")
    o = X.ex(x, "p2", {"shell": "echo /workspace/* $(id -u)"})
    check_eq(o["stdout"], "/workspace/* 1000\n", "beta's fresh: %r" % o)
    # refill
    wait_until(lambda: ready(x) == 2, 60, what="the pool filled again")
    m = metrics(x)
    check_eq(m["sluice_execd_pool_taken_total"], 2, "two taken")
    check(m["sluice_execd_pool_filled_total"] >= 4, "refilled: %r" % m)
    # other limits, and a pool of size 0: cold creates
    c = X.create(x, "c1")
    check_eq(c["pooled"], False, "default limits: cold")
    c = X.create(x, "c2", limits={"disk_mb": 24})
    check_eq(c["pooled"], False, "an empty pool: cold")
    o = X.ex(x, "c2", {"shell": "echo ok"})
    check_eq(o["stdout"], "ok\n", "the cold one runs")
    # a reload that changes the pool drops the waiting ones
    old = set(pool_dirs(x)) - {key, b2["network"]["session"]}
    x.conf["pools"] = [{"size": 1, "limits": POOL_LIMITS}]
    x.write()
    os.kill(x.proc.pid, signal.SIGHUP)
    wait_until(lambda: not (old & set(pool_dirs(x))) and ready(x) == 1, 60,
               what="the old pool dropped, the new one filled")
    # SIGTERM: every waiting sandbox dropped, the taken ones stay
    waiting = set(pool_dirs(x)) - {key, b2["network"]["session"]}
    check_eq(len(waiting), 1, "one waiting: %r" % waiting)
    check_eq(x.halt(), 0, "drained")
    check_eq(set(pool_dirs(x)) & waiting, set(), "dropped at the drain")
    for k in waiting:
        check_eq(execdlib.mounts_of(os.path.join(x.state_dir, k)), [],
                 "no mount of %s" % k)
    x.start()
    g = x.app("GET", "/v1/sandboxes/p1")
    check_eq((g.status, g.json.get("tenant")), (200, "acme"),
             "the taken one adopted: %r" % g)
    o = X.ex(x, "p1", {"shell": "echo again"})
    check_eq(o["stdout"], "again\n", "and runs")


@S.case
def pool_killed_daemon(env):
    d, ctl, x = X.start(env, pools=[{"size": 2, "limits": POOL_LIMITS}])
    wait_until(lambda: ready(x) == 2, 60, what="the pool filled")
    first = set(pool_dirs(x))
    recs = {}
    for k in first:
        with open(os.path.join(x.state_dir, k, "record.json")) as f:
            recs[k] = json.load(f)
    x.kill()
    for k, rec in recs.items():
        check_eq(execdlib.proc_start(rec["init_pid"]), rec["init_start"],
                 "%s outlives the killed daemon" % k)
    x.start()
    # the earlier run's are dropped, new ones made
    wait_until(lambda: not (first & set(pool_dirs(x))) and ready(x) == 2,
               60, what="the earlier run's pool dropped and a new one made")
    for k, rec in recs.items():
        wait_until(lambda: execdlib.proc_start(rec["init_pid"]) !=
                   rec["init_start"], 20, what="the holder of %s gone" % k)
        check_eq(execdlib.mounts_of(os.path.join(x.state_dir, k)), [],
                 "no mount of %s" % k)
    log("pool after the restart: %r" % sorted(pool_dirs(x)))


@S.case
def pool_node_drain(env):
    """A node being drained (PUT /v1/node) keeps no waiting sandbox and
    fills none; undrained, the pool fills again."""
    d, ctl, x = X.start(env, pools=[{"size": 2, "limits": POOL_LIMITS}])
    wait_until(lambda: ready(x) == 2, 60, what="the pool filled")
    first = set(pool_dirs(x))
    r = X.root_call(x.sock, "PUT", "/v1/node", body={"draining": True})
    check_eq(r.status, 200, "drain: %r" % r)
    wait_until(lambda: not pool_dirs(x), 60, what="the pool dropped")
    check_eq(ready(x), 0, "none ready")
    check_eq(metrics(x)["sluice_execd_pool_dropped_total"], 2, "dropped")
    r = X.root_call(x.sock, "PUT", "/v1/node", body={"draining": False})
    check_eq(r.status, 200, "undrain: %r" % r)
    wait_until(lambda: ready(x) == 2, 60, what="the pool filled again")
    check_eq(set(pool_dirs(x)) & first, set(), "new ones")


@S.case
def gvisor_pool_take(env):
    """The same take on gVisor: the session's socket, made after the
    sandbox started, is seen inside the sentry."""
    if not X.runsc_works():
        raise X.Skip("runsc not installed")
    d, ctl, x = X.start(env, pools=[{"backend": "gvisor", "size": 1,
                                     "limits": POOL_LIMITS}])
    wait_until(lambda: ready(x) == 1 or metrics(x).get(
        "sluice_execd_pool_fill_failed_total", 0) > 0, 120,
        what="the gVisor pool filled (or failed)")
    if ready(x) != 1:
        raise X.Skip("gvisor does not run here: %s" % x.stderr(5))
    b = X.create(x, "g1", backend="gvisor", limits=POOL_LIMITS,
                 network={"tier": "registries"})
    check_eq((b["pooled"], b["tenant"], b["backend"]),
             (True, "acme", "gvisor"), "pooled: %r" % b)
    o = X.ex(x, "g1", {"shell": "test -S /run/sluice/proxy.sock && echo "
                       "sock; " + CURL}, timeout=120)
    lines = o["stdout"].split("\n")
    check_eq(lines[0], "sock", "the socket inside: %r" % o)
    check(lines[1] not in ("", "000"), "sluiced reached: %r" % o)
    s = session(ctl, b["network"]["session"])
    check_eq((s["tenant"], s["user"]), ("acme", "alice"), "session bound")


if __name__ == "__main__":
    S.main()
