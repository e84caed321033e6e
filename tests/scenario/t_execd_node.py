#!/usr/bin/env python3
"""sluice-execd's node interface (issue 25), with the real sluiced and
real ns sandboxes, driven as an unprivileged app (t_execd.py's client):

- GET /v1/node (auditor): host, version, backends (ok, reason), capacity
  (slots, sandboxes, CPUs, memory, disk headroom), draining; no role is
  403, PUT /v1/node is admin's (app and auditor 403), a body other than
  {"draining": bool} is 400;
- PUT /v1/node {"draining": true}: a create is 503 backend_unavailable
  with reason draining; an idle sandbox is archived and removed; one
  with a background command running stays until the command ends, then
  goes (its archive holds what the command wrote); GET says remaining
  0; events node draining / drained and sandbox removed (reason drain);
  metrics sluice_execd_draining; audit records drain and remove;
- the drain is kept across a restart; PUT {"draining": false} lets
  creates in again, and a create of a drained id restores its
  workspace.

Skips (77) without root or user namespaces."""

import os
import subprocess
import time

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, check, check_eq, log, wait_until  # noqa: E402
import t_execd as X  # noqa: E402
import t_execd_life as L  # noqa: E402

S = Suite("t_execd_node", time_limit=300)


def root(x, method, body=None, raw=None):
    return X.root_call(x.sock, method, "/v1/node", body=body, raw=raw)


@S.case
def node_shape_roles(env):
    d, ctl, x = X.start(env)
    r = x.auditor("GET", "/v1/node")
    check_eq(r.status, 200, "GET /v1/node: %r" % r)
    n = r.json
    log("node: %r" % n)
    for k in ("host", "version", "backends", "capacity", "draining"):
        check(k in n, "node lacks %s: %r" % (k, n))
    check(n["host"] and n["draining"] is False and "remaining" not in n,
          "host, not draining: %r" % n)
    be = {b["name"]: b for b in n["backends"]}
    check(be["ns"]["ok"] and not be["kvm"]["ok"] and be["kvm"]["reason"],
          "backends: %r" % be)
    c = n["capacity"]
    check(c["cpus"] >= 1 and c["memory_total_bytes"] > 0 and
          0 < c["memory_available_bytes"] <= c["memory_total_bytes"] and
          c["slots"] > 0 and c["sandboxes"] == 0 and
          isinstance(c["disk_headroom_bytes"], int), "capacity: %r" % c)
    X.check_err(x.norole("GET", "/v1/node"), 403, "forbidden", "no role")
    for who, cl in (("app", x.app), ("auditor", x.auditor)):
        X.check_err(cl("PUT", "/v1/node", {"draining": True}), 403,
                    "forbidden", "%s PUT /v1/node" % who)
    for bad in ({}, {"draining": 1}, {"draining": True, "x": 1}, []):
        X.check_err(root(x, "PUT", bad), 400, "bad_request",
                    "PUT %r" % (bad,))
    check_eq(root(x, "GET").json["draining"], False, "still not draining")
    check_eq(X.metrics(x)["sluice_execd_draining"], 0, "metric")
    X.create(x, "g1")
    check_eq(x.auditor("GET", "/v1/node").json["capacity"]["sandboxes"], 1,
             "a sandbox counted")


@S.case
def drain(env):
    d, ctl, x = L.life_start(env, lifecycle={"idle_after": 0,
                                             "remove_after": 0})
    ev = L.Events(x)
    env.closers.append(ev.close)
    X.create(x, "idle1")
    check_eq(x.app("PUT", "/v1/sandboxes/idle1/files/keep.txt",
                   raw=b"kept\n").status, 201, "put")
    X.create(x, "busy1")
    r = x.app("POST", "/v1/sandboxes/busy1/commands",
              {"shell": "sleep 4; echo done > done.txt"})
    check(r.status in (200, 201, 202), "background command: %r" % r)
    r = root(x, "PUT", {"draining": True})
    check(r.status == 200 and r.json["draining"] is True and
          r.json["remaining"] == 2, "drain: %r" % r)
    t0 = time.monotonic()
    r = x.app("POST", "/v1/sandboxes", {"id": "new1", "tenant": "acme",
                                        "user": "alice"})
    X.check_err(r, 503, "backend_unavailable", "create while draining")
    hz = x.norole("GET", "/healthz")
    check(hz.status == 503 and hz.json["ok"] is False, "/healthz while "
          "draining: %r" % hz)
    check_eq(r.json["error"].get("reason"), "draining", "reason")
    # the idle one goes at once, the busy one waits for its command
    wait_until(lambda: L.state(x, "idle1") == 404, 15,
               what="idle sandbox removed (%r)" % L.state(x, "idle1"))
    log("idle one removed after %.1f s" % (time.monotonic() - t0))
    busy = L.state(x, "busy1")
    if time.monotonic() - t0 < 3.5:
        check_eq(busy, "running", "the busy one waits for its command")
    n = root(x, "GET").json
    check(n["draining"] and n["remaining"] >= (1 if busy != 404 else 0),
          "node while draining: %r" % n)
    wait_until(lambda: L.state(x, "busy1") == 404, 30,
               what="busy sandbox removed (%r)" % L.state(x, "busy1"))
    check(time.monotonic() - t0 >= 3.5, "not before its command ended")
    wait_until(lambda: root(x, "GET").json.get("remaining") == 0, 10,
               what="remaining 0")
    for sid in ("idle1", "busy1"):
        tar, meta = L.archive_files(x, sid)
        check(os.path.exists(tar) and os.path.exists(meta),
              "%s archived" % sid)
    wait_until(lambda: ("node", "drained") in [(a, b) for a, b, p in
                                               ev.list()], 10,
               what="event node drained")
    evs = ev.list()
    whats = [(a, b) for a, b, p in evs]
    check(("node", "draining") in whats, "node draining event: %r" % whats)
    rm = {p.get("id"): p.get("reason") for a, b, p in evs
          if a == "sandbox" and b == "removed"}
    check_eq(rm, {"idle1": "drain", "busy1": "drain"}, "removed events")
    m = X.metrics(x)
    check_eq((m["sluice_execd_draining"], m["sluice_execd_drain_remaining"],
              m["sluice_execd_drain_removed_total"]), (1, 0, 2), "metrics")
    acts = [(a.get("action"), (a.get("detail") or {}).get("reason"))
            for a in L.audit(x)]
    check(("drain", None) in acts and acts.count(("remove", "drain")) == 2,
          "audit: %r" % acts)
    v = subprocess.run([X.SLUICECTL, "log", "verify", "--file",
                        x.conf["log"]["path"]], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    check_eq(v.returncode, 0, "audit chain: %s" % v.stdout.decode())
    # kept across a restart
    check_eq(x.halt(), 0, "halt")
    x.start()
    n = root(x, "GET").json
    check(n["draining"] is True and n["remaining"] == 0,
          "draining after a restart: %r" % n)
    X.check_err(x.app("POST", "/v1/sandboxes", {"id": "new1"}), 503,
                "backend_unavailable", "create after the restart")
    # back in the fleet: creates restore the drained workspaces
    r = root(x, "PUT", {"draining": False})
    check(r.status == 200 and r.json == {"draining": False}, "undrain: %r"
          % r)
    check(not os.path.exists(os.path.join(x.state_dir, "node.json")),
          "node.json gone")
    b = X.create(x, "idle1")
    check(b.get("restored_from"), "restored: %r" % b)
    check_eq(X.ex(x, "idle1", {"shell": "cat keep.txt"})["stdout"], "kept\n",
             "idle1's workspace back")
    X.create(x, "busy1")
    check_eq(X.ex(x, "busy1", {"shell": "cat done.txt"})["stdout"], "done\n",
             "busy1's command had finished before its archive")
    check_eq(X.metrics(x)["sluice_execd_draining"], 0, "metric after")
    time.sleep(1.1)             # /healthz's answer is kept a second
    check_eq(x.norole("GET", "/healthz").status, 200, "/healthz after")


if __name__ == "__main__":
    S.main()
