"""The approval half: show each network prompt of the chats and answer it
in the terminal (o: once, c: this chat, d: deny), or allow every prompt
once with --yes.  Addresses from SLUICE_BROKER_ADDRESS (default
/run/sluice/control.sock)."""
import sys

from sluice import BrokerClient

yes = "--yes" in sys.argv
broker = BrokerClient()
for prompt in broker.prompts.watch():
    print(f"{prompt.session} ({prompt.tenant}/{prompt.user}) wants "
          f"{prompt.method} {prompt.target}{prompt.path or ''}; "
          f"tier {prompt.tier}, {prompt.expires_in_s}s to answer", flush=True)
    answer = "o" if yes else input("  allow [o]nce, for the [c]hat, [d]eny? ")
    done = {"o": prompt.allow_once, "c": prompt.allow_chat}.get(
        answer.strip()[:1], prompt.deny)()
    print("  ->", done.state, flush=True)
    if "--one" in sys.argv:
        break
