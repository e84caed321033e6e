"""The examples of the README run as shown (their output is what the
README prints)."""

import os
import subprocess
import sys

from conftest import BROKER, EXEC, INDEX, WEB, wait_for

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENVX = dict(os.environ, SLUICE_EXEC_ADDRESS=EXEC, SLUICE_BROKER_ADDRESS=BROKER,
            PIP_INDEX=INDEX, WEB_URL=WEB,
            PYTHONPATH=os.path.join(HERE, "src"))


def example(name, *args, timeout=120):
    r = subprocess.run([sys.executable, os.path.join(HERE, "examples", name)]
                       + list(args), capture_output=True, text=True,
                       env=ENVX, timeout=timeout)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_quickstart():
    out = example("quickstart.py").splitlines()
    assert out[:4] == ["0 42", "42", "b'some content'",
                       "[('data.txt', 12)]"]
    assert out[4].startswith("StreamChunk(stream='stdout', data='line1\\n')")
    assert out[-1].startswith("ExecResult(id='c") and "exit_code=0" in out[-1]


def test_app():
    out = example("app.py").splitlines()
    assert out[:2] == ["42", "b'some content' ['data.txt']"]
    assert out[2].startswith("sbx-") and " wants GET web.test:" in out[2]
    assert out[3] == "hello from web.test"


def test_async_chat():
    out = example("async_chat.py")
    assert "server answers 200" in out and "prompt: GET web.test:" in out
    assert "answer: allow_once" in out
    assert out.endswith("curl got: hello from web.test\n")


def test_approvals_yes():
    p = subprocess.Popen([sys.executable, os.path.join(
        HERE, "examples", "approvals.py"), "--yes", "--one"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENVX)
    try:
        import sluice
        c = sluice.SandboxClient(EXEC, broker=BROKER)
        # the approver must be watching before the prompt, or sluiced
        # refuses it at once; the example's start may take seconds on a
        # loaded machine (under the sanitizers it took more than five)
        wait_for(lambda: c.broker.health()["approvers"] >= 1 or
                 p.poll() is not None, 60, "the approver to watch")
        assert p.poll() is None, p.communicate()
        with c.sandboxes.create("acme", "carol") as sb:
            r = sb.exec(["curl", "-sS", "--max-time", "60", WEB])
        assert r.stdout == "hello from web.test\n", r
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    print(out)
    assert p.returncode == 0, out + err
    assert "(acme/carol) wants GET web.test:" in out
    assert out.endswith("  -> allow_once\n")
