"""A chat's sandbox in twenty lines: create, run, install, files, destroy.

Addresses from SLUICE_EXEC_ADDRESS (default /run/sluice-execd/exec.sock);
PIP_INDEX for a local index (the tests' registry), else PyPI."""
import os

from sluice import QuotaExceededError, SandboxClient

client = SandboxClient()
try:
    sb = client.sandboxes.create(tenant_id="acme", user_id="alice",
                                 network="registries")   # pip needs it
except QuotaExceededError as e:
    raise SystemExit(f"quota: {e.scope} has {e.in_use} of {e.limit}")
try:
    r = sb.exec(["python3", "-c", "print(6 * 7)"])
    print(r.exit_code, r.stdout, end="")
    idx = os.environ.get("PIP_INDEX")
    if idx:   # install takes names only: a mirror goes in pip's config
        sb.exec("mkdir -p ~/.config/pip && printf '[global]\\nindex-url = "
                "%s\\ntrusted-host = pypi.org\\n' > ~/.config/pip/pip.conf"
                % idx)
    sb.install(["sluicedemo"])
    print(sb.exec("python3 -c 'import sluicedemo; print(sluicedemo.VALUE)'")
          .stdout, end="")
    sb.write("data.txt", b"some content")
    print(sb.read("data.txt"))
    print([(e.path, e.size) for e in sb.list("*.txt")])
    for item in sb.stream("for i in 1 2; do echo line$i; sleep 0.2; done"):
        print(item)
finally:
    sb.destroy()
