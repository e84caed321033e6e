#!/usr/bin/env python3
"""Where a session's Unix socket may go (issue 11, findings 1, 2 and 19).

The app role gets the socket under <runtime_dir>/sessions/<id>/ and
nothing else: a socket naming the connection log, the control socket, the
state file, any regular file or (by ./ or ../) another chat's socket is
refused and the file stays.  An admin may name other paths only under
listen.socket_prefixes.  Session ids ".", ".." and ".x" are refused.  A
symlink swapped in at the socket path while sessions come and go never
makes sluiced change the mode or group of the file it points at.  Run as
root (the harness's "user": "root", or SLUICE_TEST_USER=nobody)."""

import grp
import json
import os
import signal
import socket
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, read_log,  # noqa: E402
                     log, TEST_USER)
from t_api import (setup, call, expect, new_session, run_as,  # noqa: E402
                   open_up)

S = Suite("t_socket_paths", time_limit=420)

APP_UID = 61001
CONTROL = {"socket_mode": "0666", "app_uids": [APP_UID]}


def proxy_dir(path):
    """A directory the proxy's user may write (SLUICE_TEST_USER)."""
    os.mkdir(path)
    if TEST_USER:
        import pwd
        pw = pwd.getpwnam(TEST_USER)
        os.chown(path, pw.pw_uid, pw.pw_gid)
    return path


def need_root():
    if os.geteuid() != 0:
        raise Skip("needs root to switch uids")


def ident(path):
    st = os.lstat(path)
    return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode))


def as_app(d, method, path, body=None):
    status, doc, raw = run_as(APP_UID, 65534, d.ctl, method, path, body)
    return status, doc, raw


def refused(d, body, statuses, what, code=None):
    status, doc, raw = as_app(d, "POST", "/v1/sessions", body)
    check(status in statuses, "%s: status %d, want one of %s (%r)", what,
          status, sorted(statuses), raw[:300])
    check(doc and isinstance(doc.get("error"), dict) and
          doc["error"].get("message"), "%s: error body %r", what, raw[:300])
    if code is not None:
        check_eq(doc["error"]["code"], code, "%s: error code" % what)
    return doc


def alive_socket(path):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(5)
    try:
        c.connect(path)
        return True
    except OSError:
        return False
    finally:
        c.close()


# ---------------------------------------------------------------------------

@S.case
def app_cannot_name_a_socket(env):
    need_root()
    d, _ = setup(env, control=CONTROL)
    open_up(d.ctl)
    rd = d.config["runtime_dir"]
    # the state file exists once one session was made
    expect(call(d, "POST", "/v1/sessions", new_session("other")), 201)
    other = os.path.join(rd, "sessions", "other", "proxy.sock")
    check(alive_socket(other), "other's socket serves")
    victim = env.path("victim.txt")
    with open(victim, "w") as f:
        f.write("keep me\n")
    files = {"log": d.log_path, "control socket": d.ctl,
             "state file": d.config["state_file"], "regular file": victim,
             "other chat": other}
    before = {k: ident(p) for k, p in files.items()}

    n = 0
    for what, path in (("log", d.log_path), ("control socket", d.ctl),
                       ("state file", d.config["state_file"]),
                       ("regular file", victim),
                       ("another chat's socket", other)):
        n += 1
        refused(d, new_session("a%d" % n, socket=path), {403},
                "socket = %s" % what, "forbidden")
    # other spellings of another chat's socket, and of the app's own
    for i, path in enumerate((
            os.path.join(rd, "sessions", "other", ".", "proxy.sock"),
            os.path.join(rd, "sessions", "x", "..", "other", "proxy.sock"),
            os.path.join(rd, "sessions", "other") + "//proxy.sock",
            os.path.join(rd, "sessions", "b1", ".", "proxy.sock"),
            os.path.join(rd, ".", "sessions", "b1", "proxy.sock"))):
        refused(d, new_session("b%d" % (i + 1), socket=path), {400},
                "socket %s" % path, "bad_request")
    refused(d, new_session("c1", socket="relative.sock"), {400}, "relative")

    for k, p in files.items():
        check(os.path.lexists(p), "%s %s is gone", k, p)
        check_eq(ident(p), before[k], "%s %s replaced" % (k, p))
    with open(victim) as f:
        check_eq(f.read(), "keep me\n", "victim content")
    check(alive_socket(other), "other's socket still serves")
    check(alive_socket(d.ctl), "the control socket still serves")
    h = expect(call(d, "GET", "/v1/health"), 200)
    check(h["log"]["healthy"], "log unhealthy: %r", h["log"])
    for i in range(1, n + 1):
        expect(call(d, "GET", "/v1/sessions/a%d" % i), 404, "not_found",
               "refused session a%d exists" % i)

    # the default, said or left out, is the app's
    status, doc, raw = as_app(d, "POST", "/v1/sessions", new_session("mine"))
    check_eq(status, 201, "app, no socket (%r)" % raw[:200])
    check_eq(doc["socket"], os.path.join(rd, "sessions", "mine", "proxy.sock"),
             "default socket")
    dflt = os.path.join(rd, "sessions", "mine2", "proxy.sock")
    status, doc, raw = as_app(d, "POST", "/v1/sessions",
                              new_session("mine2", socket=dflt))
    check_eq(status, 201, "app, the default path given (%r)" % raw[:200])
    check(alive_socket(dflt), "mine2 serves")
    status, _, _ = as_app(d, "DELETE", "/v1/sessions/mine2")
    check_eq(status, 200, "delete mine2")
    check(not os.path.lexists(dflt), "mine2's socket left after DELETE")
    recs = [r for r in read_log(d.log_path) if r.get("event") == "admin" and
            r.get("action") == "session_create" and r.get("who") ==
            "uid:%d" % APP_UID and r.get("outcome") == "ok"]
    check_eq(sorted(r["target"] for r in recs), ["mine", "mine2"],
             "sessions the app made")
    refusals = [r for r in read_log(d.log_path) if r.get("event") == "admin"
                and r.get("action") == "session_create" and
                r.get("outcome") == "forbidden"]
    check_eq(len(refusals), 5, "forbidden creations in the log")
    check(all(r["who"] == "uid:%d" % APP_UID and r["role"] == "app"
              for r in refusals) and d.log_path in refusals[0]["target"],
          "refusal records %r", refusals)


@S.case
def dot_ids_refused(env):
    need_root()
    d, _ = setup(env, control=CONTROL)
    open_up(d.ctl)
    rd = d.config["runtime_dir"]
    for sid in (".", "..", ".x", ".hidden-chat"):
        refused(d, new_session(sid), {400}, "app, id %r" % sid,
                "bad_request")
        r = call(d, "POST", "/v1/sessions", new_session(sid))
        expect(r, 400, "bad_request", "admin, id %r" % sid)
    check(not os.path.exists(os.path.join(rd, "sessions", "proxy.sock")),
          "a socket made for id .")
    check(not os.path.exists(os.path.join(rd, "proxy.sock")),
          "a socket made for id ..")
    check_eq(sorted(os.listdir(os.path.join(rd, "sessions")))
             if os.path.isdir(os.path.join(rd, "sessions")) else [], [],
             "session directories")
    expect(call(d, "POST", "/v1/sessions", new_session("x.y")), 201,
           what="a dot inside an id")


@S.case
def admin_paths_need_a_prefix(env):
    vm = proxy_dir(env.path("vm"))
    sock = os.path.join(vm, "v.sock_1080")
    d, _ = setup(env)
    r = call(d, "POST", "/v1/sessions", new_session("vm1", socket=sock))
    expect(r, 403, "forbidden", "admin, no socket_prefixes")
    check("socket_prefixes" in r.json["error"]["message"],
          "message names the key: %r", r.json)
    check(not os.path.lexists(sock), "socket made without a prefix")
    d.stop()

    outside = proxy_dir(env.path("outside"))
    os.symlink(outside, os.path.join(vm, "link"))
    open(os.path.join(vm, "plain"), "w").close()
    d, _ = setup(env, listen={"socket_prefixes": [vm],
                              "socket_mode": "0640"})
    s = expect(call(d, "POST", "/v1/sessions",
                    new_session("vm1", socket=sock)), 201, what="in a prefix")
    check_eq(s["socket"], sock, "socket in the answer")
    st = os.lstat(sock)
    check(stat.S_ISSOCK(st.st_mode), "not a socket")
    check_eq(stat.S_IMODE(st.st_mode), 0o640, "socket mode")
    check(alive_socket(sock), "vm1 serves")
    # a directory below the prefix is made
    deep = os.path.join(vm, "a", "b", "v.sock_1081")
    expect(call(d, "POST", "/v1/sessions", new_session("vm2", socket=deep)),
           201, what="below a prefix")
    check(stat.S_ISDIR(os.lstat(os.path.join(vm, "a")).st_mode),
          "directory made")
    # a symlink out of the prefix is not in it
    r = call(d, "POST", "/v1/sessions",
             new_session("vm3", socket=os.path.join(vm, "link", "s")))
    expect(r, 403, "forbidden", "through a symlink out of the prefix")
    check_eq(os.listdir(outside), [], "socket made outside")
    expect(call(d, "POST", "/v1/sessions",
                new_session("vm4", socket=env.path("elsewhere.sock"))),
           403, "forbidden", "outside the prefix")
    # the same socket twice, spelled another way
    expect(call(d, "POST", "/v1/sessions",
                new_session("vm5", socket=sock)), 409, "conflict", "twice")
    # an existing file that is not a socket stays
    plain = os.path.join(vm, "plain")
    before = ident(plain)
    expect(call(d, "POST", "/v1/sessions",
                new_session("vm6", socket=plain)), 409, "conflict",
           "a regular file")
    check_eq(ident(plain), before, "regular file replaced")
    # a socket another process serves stays; a stale one is replaced
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(os.path.join(vm, "live.sock"))
    live.listen(1)
    try:
        before = ident(os.path.join(vm, "live.sock"))
        expect(call(d, "POST", "/v1/sessions",
                    new_session("vm7", socket=os.path.join(vm, "live.sock"))),
               409, "conflict", "a live socket")
        check_eq(ident(os.path.join(vm, "live.sock")), before,
                 "live socket replaced")
    finally:
        live.close()
    stale = os.path.join(vm, "stale.sock")
    t = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    t.bind(stale)
    t.close()
    if TEST_USER:
        # as an earlier run of the proxy's user left it
        import pwd
        pw = pwd.getpwnam(TEST_USER)
        os.chown(stale, pw.pw_uid, pw.pw_gid)
    expect(call(d, "POST", "/v1/sessions", new_session("vm8", socket=stale)),
           201, what="a stale socket")
    check(alive_socket(stale), "vm8 serves")

    # delete unlinks only the socket sluiced made
    os.unlink(sock)
    with open(sock, "w") as f:
        f.write("not sluiced's\n")
    expect(call(d, "DELETE", "/v1/sessions/vm1"), 200)
    check(os.path.isfile(sock), "DELETE removed a file sluiced did not make")
    expect(call(d, "DELETE", "/v1/sessions/vm8"), 200)
    check(not os.path.lexists(stale), "vm8's socket left after DELETE")
    check(os.path.lexists(deep), "vm2's socket")
    d.stop()
    check(not os.path.lexists(deep), "vm2's socket left at exit")


@S.case
def prefix_not_own_files(env):
    # a prefix that holds the log, the state file and the control socket
    d, _ = setup(env, listen={"socket_prefixes": [env.dir]},
                 control={"socket": env.path("ctl", "control.sock")})
    expect(call(d, "POST", "/v1/sessions", new_session("first")), 201)
    for what, path in (("log", d.log_path),
                       ("state file", d.config["state_file"]),
                       ("control socket", d.ctl)):
        before = ident(path)
        r = call(d, "POST", "/v1/sessions", new_session("x", socket=path))
        check(r.status in (403, 409), "%s: status %d (%r)", what, r.status,
              r.body[:200])
        check_eq(ident(path), before, "%s replaced" % what)
    h = expect(call(d, "GET", "/v1/health"), 200)
    check(h["log"]["healthy"], "log unhealthy: %r", h["log"])


@S.case
def state_file_socket_outside(env):
    """A state file (an older sluiced's, or edited) whose session names
    the log: the session comes back on its default socket, the log
    stays."""
    log_path = env.path("conn.jsonl")
    with open(log_path, "w"):
        pass
    state = {"version": 1, "ceiling": None, "sessions": [
        {"id": "old", "tenant": "acme", "user": "alice", "tier": "public",
         "grants": [], "socket": log_path}]}
    with open(env.path("state.json"), "w") as f:
        json.dump(state, f)
    before = ident(log_path)
    d, _ = setup(env)
    check_eq(ident(log_path), before, "log replaced at start")
    s = expect(call(d, "GET", "/v1/sessions/old"), 200)
    want = os.path.join(d.config["runtime_dir"], "sessions", "old",
                        "proxy.sock")
    check_eq(s["socket"], want, "restored on the default socket")
    check(alive_socket(want), "old serves")
    h = expect(call(d, "GET", "/v1/health"), 200)
    check(h["log"]["healthy"], "log unhealthy: %r", h["log"])


def other_group(not_gid):
    for name in ("nogroup", "daemon", "users"):
        try:
            g = grp.getgrnam(name)
        except KeyError:
            continue
        if g.gr_gid != not_gid:
            return g
    raise Skip("no spare group for listen.socket_group")


def race(env, d, sid, path, target, gaps, tries=300, seconds=30):
    """Create and delete sid while a child renames a symlink to target
    over path, again and again: whatever is there flips to the link at
    once (the window between a bind and a chmod by path).  With gaps, the
    child also removes the link and pauses now and then, so that sockets
    do get made while it runs.  Bounded in tries and time; the child is
    ours, killed by pid."""
    tmp = os.path.join(os.path.dirname(path), "race.lnk")
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            end = time.monotonic() + seconds + 10
            for i in range(50000000):
                if i % 1024 == 0 and time.monotonic() > end:
                    break
                try:
                    os.symlink(target, tmp)
                    os.rename(tmp, path)
                    if gaps:
                        os.unlink(path)
                except OSError:
                    pass
                if gaps and i % 16 == 15:
                    time.sleep(0.001)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    made = n = 0
    try:
        end = time.monotonic() + seconds
        for n in range(1, tries + 1):
            if time.monotonic() > end:
                break
            r = call(d, "POST", "/v1/sessions", new_session(sid, socket=path))
            if r.status == 201:
                made += 1
                call(d, "DELETE", "/v1/sessions/%s" % sid)
            else:
                check(r.status in (400, 409, 500), "create: %d %r",
                      r.status, r.body[:200])
            st = os.stat(target)
            if stat.S_IMODE(st.st_mode) != 0o600:
                break
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if os.path.lexists(path):
        os.unlink(path)
    log("race%s: %d tries, %d sessions made" % (" with gaps" if gaps else "",
                                                n, made))
    return made


def race_case(env, where):
    need_root()
    target = env.path("target")
    with open(target, "w") as f:
        f.write("secret\n")
    os.chmod(target, 0o600)
    if TEST_USER:
        # a file the proxy's user owns (as it owns the log), in a group
        # that is not the user's: a chmod or chown by the proxy would
        # succeed
        import pwd
        pw = pwd.getpwnam(TEST_USER)
        os.chown(target, pw.pw_uid, 0)
        g = grp.getgrgid(pw.pw_gid)
        if g.gr_gid == 0:
            raise Skip("%s's group is root's" % TEST_USER)
    else:
        g = other_group(0)
    st0 = os.stat(target)
    listen = {"socket_mode": "0666", "socket_group": g.gr_name}
    if where == "prefix":
        vm = proxy_dir(env.path("vm"))
        listen["socket_prefixes"] = [vm]
    d, _ = setup(env, listen=listen)
    if where == "prefix":
        path = os.path.join(vm, "v.sock_1080")
    else:
        path = os.path.join(d.config["runtime_dir"], "sessions", "race",
                            "proxy.sock")
        # sluiced makes the directory (and it stays)
        expect(call(d, "POST", "/v1/sessions", new_session("race")), 201)
        expect(call(d, "DELETE", "/v1/sessions/race"), 200)
    made = 0
    for gaps in (False, True):
        made += race(env, d, "race", path, target, gaps)
        st = os.stat(target)
        check_eq(oct(stat.S_IMODE(st.st_mode)), oct(0o600),
                 "target's mode after the race (%d sessions made)" % made)
        check_eq(st.st_gid, st0.st_gid, "target's group after the race")
        check_eq((st.st_dev, st.st_ino), (st0.st_dev, st0.st_ino), "target")
        with open(target) as f:
            check_eq(f.read(), "secret\n", "target's content")
    check(made > 0, "no session was made in the race")
    left = [n for n in os.listdir(os.path.dirname(path))
            if n.startswith(".sluiced-")]
    check_eq(left, [], "private directories left behind")
    # afterwards the session works, with the configured mode and group
    if os.path.lexists(path):
        os.unlink(path)
    expect(call(d, "POST", "/v1/sessions", new_session("race", socket=path)),
           201, what="after the race")
    st = os.lstat(path)
    check(stat.S_ISSOCK(st.st_mode), "socket after the race")
    check_eq(stat.S_IMODE(st.st_mode), 0o666, "socket mode")
    check_eq(st.st_gid, g.gr_gid, "socket group")


@S.case
def symlink_race_default_path(env):
    race_case(env, "default")


@S.case
def symlink_race_prefix(env):
    race_case(env, "prefix")


if __name__ == "__main__":
    S.main()
