"""The same on asyncio: a sandbox, a background server, its output, and a
prompt answered by the app while the command waits."""
import asyncio
import os

from sluice import AsyncSandboxClient


async def main() -> None:
    client = AsyncSandboxClient()
    web = os.environ.get("WEB_URL", "http://example.com/")
    async with await client.sandboxes.create("acme", "bob") as sb:
        srv = await sb.start("python3 -m http.server 8000 --bind 127.0.0.1")
        await asyncio.sleep(1)
        r = await sb.exec("curl -s -o /dev/null -w '%{http_code}\\n' "
                          "http://127.0.0.1:8000/")
        print("server answers", r.stdout, end="")
        await srv.stop()
        print("server log:", (await srv.output()).stderr.data.splitlines()[0])
        watch = await client.broker.prompts.watch(session=sb.session).connect()
        cmd = await sb.start(["curl", "-sS", web])
        async for prompt in watch:
            print("prompt:", prompt.method, prompt.target, prompt.state)
            print("answer:", (await prompt.allow_once()).state)
            break
        await watch.aclose()
        await cmd.wait()
        print("curl got:", (await cmd.output()).stdout.data, end="")

asyncio.run(main())
