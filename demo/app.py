"""The app's half of the demo, on the Python SDK (sdk/python): a sandbox
for a chat, pip through the broker, a network prompt answered in the
terminal (or with --yes), an artifact collected, the sandbox destroyed.

demo.sh runs it as nobody in the group that has the app role on both
daemons: an app needs no privilege.

usage: app.py EXEC_SOCKET CONTROL_SOCKET INDEX_URL WEB_URL OUT_DIR [--yes]
"""

import os
import sys

from sluice import SandboxClient


def step(text):
    print("\n== %s" % text, flush=True)


def ask(prompt, yes):
    if yes:
        print("  (--yes: allow once)", flush=True)
        return "o"
    for _ in range(10):
        sys.stdout.write("  allow [o]nce, for the [c]hat, or [d]eny? ")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            return "d"
        if line.strip()[:1] in ("o", "c", "d"):
            return line.strip()[:1]
    return "d"


def main():
    exec_sock, ctl_sock, index, web, out_dir = sys.argv[1:6]
    yes = "--yes" in sys.argv[6:]
    client = SandboxClient(exec_sock, broker=ctl_sock)

    step("the app (uid %d) creates a sandbox for chat demo-chat, tier "
         "registries" % os.getuid())
    print('>>> sb = client.sandboxes.create(tenant_id="demo", '
          'user_id="alice", id="demo-chat")')
    sb = client.sandboxes.create(tenant_id="demo", user_id="alice",
                                 id="demo-chat", network="registries")
    try:
        i = sb.info()
        print("%s: %s on %s, tier %s, broker session %s" % (
            i.id, i.state, i.backend, i.tier, i.broker))
        print('>>> sb.exec("cat /proc/net/dev; echo $HTTPS_PROXY")')
        print(sb.exec("cat /proc/net/dev; echo $HTTPS_PROXY").stdout, end="")

        step("pip installs a package from the registry through the broker")
        # the registry here is a local stand-in: pip is pointed at it by
        # its own config file (install takes package names only)
        host = index.split("/")[2].split(":")[0]
        sb.exec("mkdir -p ~/.config/pip && printf '[global]\\nindex-url = "
                "%s\\ntrusted-host = %s\\n' > ~/.config/pip/pip.conf"
                % (index, host))
        print('>>> sb.install(["sluicedemo"])')
        r = sb.install(["sluicedemo"])
        print(r.stdout.strip().splitlines()[-1])
        r = sb.exec(["python3", "-c", "import sluicedemo; "
                     "print('sluicedemo.VALUE =', sluicedemo.VALUE)"])
        print(r.stdout, end="")

        step("a host outside the chat's tier: the broker asks the app")
        print(">>> with client.broker.prompts.watch() as prompts:")
        with client.broker.prompts.watch(session=sb.session) as prompts:
            print('>>>     fetch = sb.start(["curl", "-sS", "%s"])' % web)
            fetch = sb.start(["curl", "-sS", "--max-time", "120", "-o",
                              "page.html", "-w", "%{http_code}\\n", web])
            print(">>>     for prompt in prompts: ...")
            for prompt in prompts:
                print("prompt %s: chat %s (%s/%s) wants %s %s%s" % (
                    prompt.id, prompt.session, prompt.tenant, prompt.user,
                    prompt.method, prompt.target, prompt.path or ""))
                a = ask(prompt, yes)
                done = {"o": prompt.allow_once, "c": prompt.allow_chat,
                        "d": prompt.deny}[a]()
                print("  answered: %s" % done.state)
                break
        st = fetch.wait(timeout=180)
        print("curl exited %s, HTTP %s" % (
            st.exit_code, fetch.output(0).stdout.data.strip() or "-"))

        step("an artifact: the chat writes a report, the app collects it")
        sb.exec(["python3", "-c", """
import os, sluicedemo
page = open('page.html').read() if os.path.exists('page.html') else ''
with open('report.txt', 'w') as f:
    f.write('sluicedemo.VALUE = %d\\n' % sluicedemo.VALUE)
    f.write('fetched: %s\\n' % (page.strip() or '(nothing: denied)'))
"""])
        print('>>> sb.list("*.txt"); sb.read("report.txt")')
        for e in sb.list("*.txt"):
            print("%s %s %d bytes" % (e.mode, e.path, e.size))
        data = sb.read("report.txt")
        path = os.path.join(out_dir, "report.txt")
        with open(path, "wb") as f:
            f.write(data)
        print("collected %s:" % path)
        print(data.decode(), end="")
    finally:
        step("the app destroys the sandbox")
        print(">>> sb.destroy()")
        sb.destroy()
        print("gone: %s" % [s.id for s in client.sandboxes.list()])


if __name__ == "__main__":
    main()
