"""Commands: exec, stream, background (start/output/wait/stop), cancel,
busy, install."""

import threading
import time

import pytest

import sluice
from conftest import PIP_CONF, wait_for


def test_exec_result(sandbox):
    r = sandbox.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.exit_code, r.signal, r.stdout, r.stderr, r.ok) == (
        3, None, "out\n", "err\n", False)
    assert not (r.timed_out or r.cancelled or r.oom_killed)
    assert r.id.startswith("c") and r.duration_ms >= 0
    # a shell string, env, cwd, stdin (str and bytes)
    sandbox.exec("mkdir -p sub")
    r = sandbox.exec("cat; echo $FOO; pwd", env={"FOO": "bar"}, cwd="sub",
                     stdin="in put\n")
    assert r.stdout == "in put\nbar\n/workspace/sub\n"
    assert sandbox.exec(["cat"], stdin=b"bytes").stdout == "bytes"
    # a signal death is 128+N with signal N
    r = sandbox.exec("kill -9 $$")
    assert (r.exit_code, r.signal) == (137, 9)


def test_exec_timeout_cap_binary(sandbox):
    t0 = time.monotonic()
    r = sandbox.exec(["sleep", "30"], timeout_s=1)
    assert r.timed_out and not r.ok and time.monotonic() - t0 < 15
    r = sandbox.exec("head -c 5000 /dev/zero | tr '\\0' x", output_cap=100)
    assert r.stdout_truncated and len(r.stdout) == 100
    r = sandbox.exec(["printf", "\\377\\000ok"], binary=True)
    assert r.stdout_raw == b"\xff\x00ok"
    assert r.stdout == "\ufffd\x00ok"
    r = sandbox.exec(["printf", "\\377ok"])
    assert r.stdout == "\ufffdok"


def test_busy_and_cancel(sandbox):
    box = {}

    def long():
        box["r"] = sandbox.exec(["sleep", "60"])
    t = threading.Thread(target=long)
    t.start()
    wait_for(lambda: sandbox.info().usage.get("foreground"), 10,
             "the foreground command")
    with pytest.raises(sluice.BusyError) as ei:
        sandbox.exec(["true"])
    assert (ei.value.status, ei.value.code) == (429, "busy")
    assert sandbox.cancel() == 1
    t.join(30)
    assert box["r"].cancelled and not box["r"].ok


def test_stream(sandbox):
    t0 = time.monotonic()
    seen = []
    for item in sandbox.stream("echo one; sleep 1; echo two >&2; sleep 0.3; "
                                 "echo three"):
        seen.append((time.monotonic() - t0, item))
    chunks = [i for _, i in seen if isinstance(i, sluice.StreamChunk)]
    result = seen[-1][1]
    assert isinstance(result, sluice.ExecResult)
    assert [(c.stream, c.data) for c in chunks] == [
        ("stdout", "one\n"), ("stderr", "two\n"), ("stdout", "three\n")]
    # the first chunk came before the command ended
    assert seen[0][0] < seen[-1][0] - 0.5
    assert (result.exit_code, result.stdout, result.stderr) == (
        0, "one\nthree\n", "two\n")
    # binary, and an error before the stream starts
    items = list(sandbox.stream(["printf", "\\377"], binary=True))
    assert items[0].data_raw == b"\xff" and items[-1].stdout_raw == b"\xff"
    with pytest.raises(sluice.BadRequestError):
        list(sandbox.stream(["true"], timeout_s=100000))


def test_background(sandbox):
    cmd = sandbox.start("for i in 1 2 3; do echo bg$i; sleep 0.3; done; "
                        "echo done >&2")
    assert cmd.status == "running" and cmd.id
    wait_for(lambda: cmd.output(0).stdout.data.startswith("bg1"), 10,
             "first output")
    # successive calls return what is new
    o1 = cmd.output(0)
    got = o1.stdout.data
    st = cmd.wait(timeout=20)
    assert st.status == "exited" and st.exit_code == 0 and st.background
    o2 = cmd.output()
    assert o2.stdout.offset == o1.stdout.next
    assert got + o2.stdout.data == "bg1\nbg2\nbg3\n"
    assert o2.stderr.data == "done\n"
    assert cmd.output(4).stdout.data == "bg2\nbg3\n"
    assert cmd.status == "exited" and cmd.last.stdout_bytes == 12
    assert cmd.id in [c.id for c in sandbox.commands()]
    again = sandbox.command(cmd.id)
    assert again.status == "exited" and again.last.argv[-1].startswith("for")


def test_background_stop_wait_ring(sandbox):
    srv = sandbox.start(["sleep", "600"])
    with pytest.raises(TimeoutError):
        srv.wait(timeout=0.5)
    srv.stop()
    st = srv.wait(timeout=20)
    assert st.status == "exited" and st.signal is not None
    # the ring keeps the last 4096 bytes: an old offset starts at the
    # oldest byte kept, and says so
    big = sandbox.start("seq 1 3000")
    big.wait(timeout=20)
    o = big.output(0)
    assert o.stdout.offset > 0 and o.stdout.next == big.last.stdout_bytes
    assert o.stdout.data.endswith("2999\n3000\n")
    with pytest.raises(sluice.NotFoundError):
        sandbox.command("c999999")


def test_cancel_all(sandbox):
    a = sandbox.start(["sleep", "600"])
    b = sandbox.start(["sleep", "600"])
    assert sandbox.cancel() == 0
    assert sandbox.cancel(all=True) == 2
    for c in (a, b):
        assert c.wait(timeout=20).cancelled


def test_install_pip(make):
    sb = make(network="registries")
    assert sb.exec(PIP_CONF).ok
    r = sb.install("sluicedemo")
    assert r.ok and "Successfully installed sluicedemo" in r.stdout
    assert sb.exec(["python3", "-c", "import sluicedemo; "
                    "print(sluicedemo.VALUE)"]).stdout == "42\n"
    with pytest.raises(sluice.CommandError) as ei:
        sb.install(["no-such-package-x"])
    assert ei.value.result.exit_code != 0
    # the executor's own answer: tier off admits no registry
    off = make(network="off")
    with pytest.raises(sluice.NetworkNotPermittedError) as ei:
        off.install("sluicedemo")
    assert ei.value.code == "network_not_permitted" and ei.value.status == 403
    # what the sandbox asked for, what the ceiling is, and what is left
    assert (ei.value.tier, ei.value.ceiling, ei.value.effective_tier) == (
        "off", "public", "off")
    # and a name that is an option or a URL is the executor's 400
    for bad in ("--index-url=http://x/", "http://x/p.whl"):
        with pytest.raises(sluice.BadRequestError) as eb:
            sb.install([bad])
        assert eb.value.status == 400 and eb.value.code == "bad_request"
    with pytest.raises(sluice.BadRequestError):
        sb.install(["--global"], manager="npm")
    with pytest.raises(ValueError):
        sb.install([], manager="pip")
    with pytest.raises(ValueError):
        sb.install(["x"], manager="cargo")


def test_install_under_a_ceiling_off(make, admin_broker):
    """The tenant's ceiling makes the effective tier off: the error says
    both what the sandbox asked for and the ceiling."""
    admin_broker.ceilings.set(tenants={"nonet": "off"})
    try:
        sb = make("nonet", network="registries")
        with pytest.raises(sluice.NetworkNotPermittedError) as ei:
            sb.install("sluicedemo")
        e = ei.value
        assert (e.tier, e.ceiling, e.effective_tier) == (
            "registries", "off", "off")
        assert e.details["broker"] == "ok"
    finally:
        admin_broker.ceilings.set(tenants={"nonet": None})


def test_changed_and_artifacts(sandbox):
    """What a command did to the workspace, typed: changed, artifacts
    (files made under outputs/, with SHA-256) and what a limit left out
    (20 artifacts per command by default)."""
    import hashlib
    assert sandbox.write("old.txt", b"x") == 1
    r = sandbox.exec("printf abcd > mod.txt; rm old.txt; mkdir -p outputs; "
                     "printf 'a chart' > outputs/chart.txt")
    ch = {c.path: c for c in r.changed}
    assert isinstance(ch["mod.txt"], sluice.Change)
    assert (ch["mod.txt"].change, ch["mod.txt"].type, ch["mod.txt"].size) \
        == ("created", "file", 4)
    assert ch["old.txt"].change == "deleted"
    assert ch["outputs"].type == "directory"
    assert r.changed_truncated is False
    assert r.artifacts == [sluice.Artifact(
        "outputs/chart.txt", 7, hashlib.sha256(b"a chart").hexdigest())]
    assert r.artifacts_skipped == []
    r = sandbox.exec("for i in $(seq -w 1 21); do echo $i > outputs/f$i; "
                     "done")
    assert len(r.artifacts) == 20
    assert [(s.path, s.size, s.limit) for s in r.artifacts_skipped] == [
        ("outputs/f21", 3, "count")]
    assert isinstance(r.artifacts_skipped[0], sluice.ArtifactSkipped)
    # a background command's status says the same once it has ended
    cmd = sandbox.start("printf z > outputs/bg.txt")
    st = cmd.wait(timeout=20)
    assert [a.path for a in st.artifacts] == ["outputs/bg.txt"]
    assert "outputs/bg.txt" in [c.path for c in st.changed]


def test_output_cap_total(sandbox):
    """One cap for the whole answer, both streams together, in bytes:
    what came first is kept, output_dropped says how much was not."""
    r = sandbox.exec("printf aaaaaaaaaa; sleep 0.3; printf bbbbbbbbbb >&2; "
                     "sleep 0.3; printf cccccccccc", output_cap_total=15)
    assert (r.stdout, r.stderr) == ("aaaaaaaaaa", "bbbbb")
    assert r.output_dropped == 15
    assert r.stdout_truncated and r.stderr_truncated
    # a character the cap cuts is dropped whole (and counted)
    r = sandbox.exec("printf 'ééé'", output_cap_total=5)
    assert (r.stdout, r.output_dropped, r.stdout_truncated) == ("éé", 2, True)
    # under the cap nothing is dropped; without one, no count at all
    r = sandbox.exec("echo hi; echo err >&2", output_cap_total=100)
    assert (r.stdout, r.stderr, r.output_dropped) == ("hi\n", "err\n", 0)
    assert sandbox.exec("echo hi").output_dropped is None
    # with the per-stream cap too: both hold
    r = sandbox.exec("printf 0123456789", output_cap=4, output_cap_total=6)
    assert (r.stdout, r.output_dropped) == ("0123", 6)
    with pytest.raises(sluice.BadRequestError) as ei:
        sandbox.exec("true", output_cap_total=-1)
    assert ei.value.field == "output_cap_total"
