"""The README's "Use it from an app": a chat's sandbox and the approval
half.  WEB_URL is a site outside the chat's tier; PIP_INDEX an index
(default PyPI)."""
import os

from sluice import SandboxClient

client = SandboxClient()   # /run/sluice-execd/exec.sock: your uid is your role
sb = client.sandboxes.create(tenant_id="acme", user_id="alice",  # not retried
                             network="registries")   # default: the daemon's
try:
    print(sb.exec(["python3", "-c", "print(6 * 7)"]).stdout, end="")
    if os.environ.get("PIP_INDEX"):   # a mirror goes in pip's config
        sb.exec("mkdir -p ~/.config/pip && printf '[global]\\nindex-url = "
                "%s\\ntrusted-host = pypi.org\\n' > ~/.config/pip/pip.conf"
                % os.environ["PIP_INDEX"])
    sb.install(["sluicedemo"])
    sb.write("data.txt", b"some content")
    print(sb.read("data.txt"), sb.list("*.txt").paths)
    with client.broker.prompts.watch(session=sb.session) as prompts:  # approver
        fetch = sb.start(["curl", "-sS", os.environ["WEB_URL"]])   # asks
        for prompt in prompts:
            print(prompt.session, "wants", prompt.method, prompt.target)
            prompt.allow_once()              # or allow_chat(), deny()
            break
    fetch.wait()
    print(fetch.output().stdout.data, end="")
finally:
    sb.destroy()
