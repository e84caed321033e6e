#!/usr/bin/env python3
"""sluicectl console in a real browser (issue 16): Debian's chromium,
headless, driven by chromium-driver through python3-selenium, in front of
the real sluiced (tests/scenario/harness.py).

A sandbox's curl waits on a prompt; the card appears without a reload;
an answer given elsewhere (sluicectl prompts answer) takes its card away
within a second; "Allow for this chat" lets the curl through and the
grant is listed on the sessions page.  A console run as an app-role uid
has no ceiling page and cannot read root's log; an admin changes a
tenant's ceiling.  Without the token, with a used token or from a
foreign Origin, requests are refused.  Text from sandboxes and sessions
stays text.  The executor's parts show while its socket answers.  A
screenshot of the prompts page is saved and checked not to be blank;
SLUICE_UPDATE_SCREENSHOT=1 copies it to docs/console-prompts.png.

Skips (77) without chromium, chromedriver or selenium; with
SLUICE_TEST_STRICT=1 a skip fails.  The browser resolves no name but
loopback (--host-resolver-rules) and does no background networking.
"""

import atexit
import http.client
import json
import os
import pwd
import re
import select
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scenario"))
from harness import (Suite, Skip, Fail, check, check_eq, api_unix,  # noqa: E402
                     wait_until, require_tool, log, BUILDDIR, SRCDIR)
import execdlib  # noqa: E402

S = Suite("t_console", time_limit=420)

APP_UID = 61011
CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
WIDTH, HEIGHT = 1280, 820


# ---------------------------------------------------------------------------
# The browser: one for the whole suite, started on first use.

_browser = {}


def selenium():
    try:
        import selenium.webdriver  # noqa: F401
    except ImportError:
        # Debian's python3-selenium, when the python3 running us is
        # another one (pyenv, a venv)
        dist = "/usr/lib/python3/dist-packages"
        if os.path.isdir(os.path.join(dist, "selenium")) and dist not in sys.path:
            sys.path.append(dist)
        try:
            import selenium.webdriver  # noqa: F401
        except ImportError as e:
            raise Skip("python3-selenium is not installed (%s)" % e)
    import selenium.webdriver
    return selenium.webdriver


def browser():
    if "d" in _browser:
        return _browser["d"]
    chrome = next((p for p in CHROMIUM if os.access(p, os.X_OK)), None)
    driver = next((p for p in DRIVER if os.access(p, os.X_OK)), None)
    if chrome is None:
        raise Skip("chromium is not installed")
    if driver is None:
        raise Skip("chromium-driver is not installed")
    wd = selenium()
    from selenium.webdriver.chrome.service import Service
    o = wd.ChromeOptions()
    o.binary_location = chrome
    for a in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=%d,%d" % (WIDTH, HEIGHT),
              "--force-device-scale-factor=1", "--lang=en-US",
              "--no-first-run", "--no-default-browser-check",
              "--disable-extensions", "--disable-background-networking",
              "--disable-component-update", "--disable-sync",
              "--disable-default-apps", "--disable-domain-reliability",
              "--disable-client-side-phishing-detection",
              "--metrics-recording-only", "--password-store=basic",
              "--force-color-profile=srgb",
              # nothing but loopback resolves: no traffic leaves the host
              "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost, "
              "EXCLUDE 127.0.0.1"):
        o.add_argument(a)
    if os.geteuid() == 0:
        o.add_argument("--no-sandbox")   # chromium refuses root otherwise
    d = wd.Chrome(service=Service(executable_path=driver,
                                  log_path=os.devnull), options=o)
    d.set_page_load_timeout(30)
    d.set_script_timeout(10)
    _browser["d"] = d
    atexit.register(d.quit)
    return d


def wait_for(pred, timeout=10, what="the page"):
    """wait_until over the browser, ignoring a stale element mid-redraw."""
    from selenium.common.exceptions import (StaleElementReferenceException,
                                            NoSuchElementException)

    def safe():
        try:
            return pred()
        except (StaleElementReferenceException, NoSuchElementException):
            return None
    return wait_until(safe, timeout, step=0.05, what=what)


def act(fn, timeout=5, what="an action"):
    """fn() on elements that a redraw may replace under it: again with
    fresh ones until it goes through."""
    from selenium.common.exceptions import StaleElementReferenceException

    def once():
        try:
            fn()
            return True
        except StaleElementReferenceException:
            return False
    wait_until(once, timeout, step=0.1, what=what)


def wait_text(d, css, want, timeout=10, what="the page"):
    """Wait for want in the text of css; on a timeout say what is there."""
    try:
        return wait_for(lambda: want in (one(d, css).text or ""), timeout,
                        what)
    except Fail:
        el = one(d, css)
        try:
            msgs = [e.get("message") for e in d.get_log("browser")][-10:]
        except Exception:       # a driver without logs
            msgs = []
        raise Fail("timed out after %ss waiting for %s: %s says %r; the "
                   "browser's console: %r" % (timeout, what, css,
                                              el.text if el else None, msgs))


def by_css(d, css):
    from selenium.webdriver.common.by import By
    return d.find_elements(By.CSS_SELECTOR, css)


def one(d, css):
    els = by_css(d, css)
    return els[0] if els else None


# ---------------------------------------------------------------------------
# sluiced, the console, a sandbox's curl

def sluicectl_path():
    p = os.path.join(BUILDDIR, "proxy", "sluicectl", "sluicectl")
    if not os.access(p, os.X_OK):
        raise Fail("sluicectl not built at %s" % p)
    return p


def open_up(path):
    """Let other uids reach a socket under path (test dirs are 0700)."""
    p = os.path.dirname(path)
    for _ in range(20):
        if p in ("/", "/tmp", ""):
            break
        os.chmod(p, os.stat(p).st_mode | 0o011)
        p = os.path.dirname(p)


def start_sluiced(env, user="alice@acme.example", sid="chat-4711", **over):
    up = env.http_upstream()
    sessions = [{"id": sid, "tenant": "acme", "user": user,
                 "tier": "registries", "source": env.src(1)},
                {"id": "chat-4712", "tenant": "globex", "user": "bob",
                 "tier": "off", "source": env.src(2)}]
    cfg = env.config(sessions=sessions, ceiling="public",
                     registries=["reg.test"], ports=env.ports(up.port),
                     dns={"hosts": {"reg.test": ["127.0.0.1"],
                                    "ask.test": ["127.0.0.1"],
                                    "pypi.example": ["127.0.0.1"]}},
                     prompt={"timeout_s": 90, "deny_quiet_s": 1}, **over)
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    d.up = up
    return d


class Console:
    """sluicectl console, run as uid (None: as we are), on a free port."""

    def __init__(self, env, d, uid=None, exec_socket=None, extra=()):
        self.exec_socket = exec_socket or env.path("no-exec.sock")
        args = [sluicectl_path(), "--socket", d.ctl] + list(extra) + [
            "console", "--port", "0", "--exec-socket", self.exec_socket]
        kw = {}
        if uid is not None:
            kw = {"user": uid, "group": 65534, "extra_groups": []}
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, **kw)
        # stopped with the daemons, and its stderr shown with theirs
        # when a case fails
        self.name = "sluicectl console"
        self.skip_chain = True
        self.lock = threading.Lock()
        env.daemons.append(self)
        self.out = b""
        self.err = b""
        deadline = time.monotonic() + 10
        while b"?token=" not in self.out and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            r, _, _ = select.select([self.proc.stdout, self.proc.stderr],
                                    [], [], 0.2)
            for f in r:
                chunk = os.read(f.fileno(), 65536)
                if f is self.proc.stdout:
                    self.out += chunk
                else:
                    self.err += chunk
        m = re.search(rb"http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{64})",
                      self.out)
        if not m:
            raise Fail("no URL from sluicectl console: %r %r"
                       % (self.out, self.err))
        self.port = int(m.group(1))
        self.token = m.group(2).decode()
        self.url = m.group(0).decode()
        self.base = "http://127.0.0.1:%d" % self.port
        # keep the pipes from filling; stderr is kept for finish()
        for f in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=self._drain, args=(f,), daemon=True).start()

    def _drain(self, f):
        for _ in range(100000):
            chunk = os.read(f.fileno(), 4096)
            if not chunk:
                return
            if f is self.proc.stderr:
                with self.lock:
                    if len(self.err) < 1 << 20:
                        self.err += chunk

    def stderr(self):
        rc = self.proc.poll()
        with self.lock:
            return self.err.decode("utf-8", "replace")[-6000:] + (
                "" if rc is None else "\n(exited with %s)" % rc)

    def stop(self, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def finish(self):
        """Stop on SIGTERM: a clean exit, nothing from the sanitizers."""
        rc = self.stop()
        time.sleep(0.1)
        with self.lock:
            err = self.err.decode("utf-8", "replace")
        check(rc == 0 and "Sanitizer" not in err and
              "runtime error" not in err,
              "sluicectl console exited %s:\n%s", rc, err[-3000:])

    def request(self, method, path, body=None, headers=None, host=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        h = {"Host": host or "127.0.0.1:%d" % self.port}
        h.update(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            raw = r.read()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), raw
        finally:
            c.close()


class Curl(threading.Thread):
    """A sandbox's curl through sluiced (the session's source address)."""

    def __init__(self, d, src, url):
        super().__init__(daemon=True)
        exe = require_tool("curl")
        host, port = d.tcp_addr
        self.cmd = [exe, "-sS", "-g", "--max-time", "60", "-x",
                    "http://%s:%d" % (host, port), "--interface", src,
                    "-o", "-", "-w", "\n%{http_code}", url]
        self.code = None
        self.body = None
        self.start()

    def run(self):
        p = subprocess.run(self.cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=70)
        text = p.stdout.decode("utf-8", "replace")
        self.body, _, code = text.rpartition("\n")
        self.code = int(code) if code.isdigit() else None


def pending(d):
    r = api_unix(d.ctl, "GET", "/v1/prompts")
    check_eq(r.status, 200, "GET /v1/prompts")
    return r.json["prompts"]


def sign_in(drv, con):
    drv.get(con.url)
    # the token is gone from the address bar
    wait_for(lambda: drv.current_url.rstrip("/") == con.base.rstrip("/") or
             drv.current_url.startswith(con.base + "/#"), 10,
             "the redirect to the console without its token")
    wait_for(lambda: "role" in (one(drv, "#whoami").text or ""), 10,
             "the console to know its role")


def cards(drv):
    return by_css(drv, "#cards article.card")


def card_for(drv, pid):
    return one(drv, '#cards article.card[data-prompt-id="%s"]' % pid)


# ---------------------------------------------------------------------------
# PNG, enough to say a screenshot is not blank (no imaging library)

def png_pixels(path):
    """(width, height, number of distinct colours among sampled pixels,
    share of the commonest one) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG", path)
    pos, idat, w, h, ctype = 8, b"", 0, 0, None
    while pos + 8 <= len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if typ == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            check(depth == 8 and ctype in (2, 6) and interlace == 0,
                  "PNG kind %r", (depth, ctype, interlace))
        elif typ == b"IDAT":
            idat += body
        elif typ == b"IEND":
            break
    bpp = 3 if ctype == 2 else 4
    stride = w * bpp
    raw = zlib.decompress(idat)
    check(len(raw) == h * (stride + 1), "PNG data size")
    prev = bytearray(stride)
    counts = {}
    i = 0
    for y in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        if f == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif f == 2:
            for x in range(stride):
                line[x] = (line[x] + prev[x]) & 255
        elif f == 3:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((a + prev[x]) >> 1)) & 255
        elif f == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                c = prev[x - bpp] if x >= bpp else 0
                b = prev[x]
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 255
        if y % 4 == 0:
            for x in range(0, stride, bpp * 4):
                px = bytes(line[x:x + 3])
                counts[px] = counts.get(px, 0) + 1
        prev = line
    total = sum(counts.values()) or 1
    return w, h, len(counts), max(counts.values()) / total


def screenshot(drv, env, name):
    path = env.path(name)
    check(drv.save_screenshot(path), "the screenshot was not written")
    size = os.path.getsize(path)
    w, h, ncolors, top = png_pixels(path)
    log("screenshot %s: %dx%d, %d bytes, %d colours, commonest %.0f%%"
        % (name, w, h, size, ncolors, top * 100))
    check(w >= WIDTH * 0.9 and h >= HEIGHT * 0.5, "screenshot size %dx%d", w, h)
    check(size > 20000, "screenshot of %d bytes: blank?", size)
    check(ncolors >= 16 and top < 0.95,
          "screenshot looks blank: %d colours, one covers %.0f%%",
          ncolors, top * 100)
    return path


# ---------------------------------------------------------------------------
# Cases

@S.case
def prompt_cards_live(env):
    drv = browser()
    d = start_sluiced(env)
    con = Console(env, d)
    sign_in(drv, con)
    drv.get(con.base + "/#prompts")
    wait_for(lambda: one(drv, "#prompts-live").get_attribute("data-state")
             == "live", 10, "the event stream to be live")
    wait_until(lambda: api_unix(d.ctl, "GET", "/v1/health").json
               ["approvers"] >= 1, 5, what="the console as an approver")
    check(one(drv, "#prompts-empty").is_displayed(), "no 'no prompts' note")
    # a marker that a reload would lose
    drv.execute_script("window.__noReload = 4711;")

    port = d.up.port
    first = Curl(d, env.src(1), "http://ask.test:%d/ok" % port)
    wait_for(lambda: len(cards(drv)) == 1, 15, "the first card")
    second = Curl(d, env.src(1), "http://pypi.example:%d/simple/" % port)
    wait_for(lambda: len(cards(drv)) == 2, 15, "the second card")
    check_eq(drv.execute_script("return window.__noReload;"), 4711,
             "the page was not reloaded")
    ps = {p["host"]: p for p in pending(d)}
    check_eq(sorted(ps), ["ask.test", "pypi.example"], "pending prompts")
    card = card_for(drv, ps["ask.test"]["id"])
    check(card is not None, "no card for the ask.test prompt")
    t = card.text
    for want in ("GET ask.test:%d" % port, "chat-4711", "acme",
                 "alice@acme.example", "Waiting requests", "/ok",
                 "Allow once", "Allow for this chat", "Deny"):
        check(want in t, "card lacks %r: %r", want, t)
    left = card.find_element("css selector", ".left")
    m = re.match(r"^(?:(\d+) min )?(\d+) s left$", left.text)
    check(m, "time left %r", left.text)
    secs = int(m.group(1) or 0) * 60 + int(m.group(2))
    check(80 <= secs <= 90, "time left %d s of 90", secs)
    wait_for(lambda: left.text != m.group(0), 3, "the countdown to move")
    check_eq(one(drv, "#prompt-count").text, "2", "the count in the menu")

    time.sleep(0.5)     # let the second card settle for the picture
    shot = screenshot(drv, env, "console-prompts.png")
    if os.environ.get("SLUICE_UPDATE_SCREENSHOT") == "1":
        dest = os.path.join(SRCDIR, "docs", "console-prompts.png")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(shot, dest)
        log("screenshot copied to %s" % dest)

    # an answer given elsewhere takes the card away within a second
    pid2 = ps["pypi.example"]["id"]
    r = subprocess.run([sluicectl_path(), "--socket", d.ctl, "prompts",
                        "answer", pid2, "deny"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20)
    t0 = time.monotonic()
    check_eq(r.returncode, 0, "sluicectl prompts answer (%r)" % r.stderr)
    wait_for(lambda: card_for(drv, pid2) is None, 1.0,
             "the answered card to go within a second")
    log("card gone %.0f ms after the answer elsewhere"
        % ((time.monotonic() - t0) * 1000))
    second.join(20)
    check_eq(second.code, 403, "the denied curl")

    # "Allow for this chat" on the other card
    card = card_for(drv, ps["ask.test"]["id"])
    card.find_element("css selector",
                      'button[data-answer="allow_chat"]').click()
    first.join(30)
    check(not first.is_alive(), "the curl still waits")
    check_eq(first.code, 200, "the allowed curl")
    check("ok" in first.body, "curl body %r" % first.body[:200])
    wait_for(lambda: len(cards(drv)) == 0, 5, "no cards left")
    check(one(drv, "#prompts-empty").is_displayed(), "no 'no prompts' note")

    # the grant, on the sessions page
    drv.find_element("css selector", 'a[href="#sessions"]').click()
    grant = "ask.test:%d" % port
    row = wait_for(lambda: one(drv, 'tr[data-session="chat-4711"]'), 5,
                   "the session row")
    wait_for(lambda: grant in one(drv, 'tr[data-session="chat-4711"]').text,
             8, "the grant in the session's row")
    row = one(drv, 'tr[data-session="chat-4711"]')
    row.find_element("css selector", "button").click()     # Details
    wait_for(lambda: one(drv, "#session-detail").is_displayed(), 5,
             "the session's details")
    gt = one(drv, "#grants-table").text
    check("ask.test" in gt and str(port) in gt and "Revoke" in gt,
          "grants table %r", gt)
    s = api_unix(d.ctl, "GET", "/v1/sessions/chat-4711").json
    check_eq(s["grants"], [{"host": "ask.test", "port": port}], "grants")

    # the log: the chain verifies; the chat's allowed requests, one
    # record's every field
    drv.find_element("css selector", 'a[href="#log"]').click()
    wait_text(drv, "#chain-status", "Chain intact", 10, "the chain's status")
    check("holds the last record sluiced reports" in
          one(drv, "#chain-status").text, "the head sluiced reports: %r",
          one(drv, "#chain-status").text)
    one(drv, "#log-session").send_keys("chat-4711")
    from selenium.webdriver.support.ui import Select
    Select(one(drv, "#log-decision")).select_by_value("allow")
    one(drv, "#log-form").find_element("css selector", "button").click()
    wait_text(drv, "#log-summary", "1 matching record", 10, "the query")
    rows = by_css(drv, "#log-table tbody tr")
    check(len(rows) == 1 and "ask.test:%d" % port in rows[0].text and
          "allow" in rows[0].text, "log rows %r", [r.text for r in rows])
    rows[0].find_element("css selector", "button").click()
    wait_for(lambda: one(drv, "#log-detail").is_displayed(), 5,
             "the record's fields")
    fields = one(drv, "#log-fields").text
    for want in ("answer", "allow_chat", "prompt", "hash", "prev", "seq"):
        check(want in fields, "record fields lack %r: %r", want, fields)
    Select(one(drv, "#log-decision")).select_by_value("deny")
    one(drv, "#log-reason").send_keys("user_denied")
    one(drv, "#log-form").find_element("css selector", "button").click()
    wait_text(drv, "#log-summary", "1 matching record", 10,
              "the denied request by its reason")
    check("pypi.example" in one(drv, "#log-table").text, "the denied record")

    # the page was the approver: gone with it, not at the next ping
    check_eq(api_unix(d.ctl, "GET", "/v1/health").json["approvers"], 1,
             "approvers with the page open")
    drv.get("about:blank")
    t0 = time.monotonic()
    wait_until(lambda: api_unix(d.ctl, "GET", "/v1/health").json
               ["approvers"] == 0, 5, what="no approver once the page is closed")
    log("approver gone %.0f ms after the page" % ((time.monotonic() - t0) * 1000))
    con.finish()


@S.case
def app_role_has_no_ceiling(env):
    if os.geteuid() != 0:
        raise Skip("needs root to run the console as another uid")
    drv = browser()
    d = start_sluiced(env, control={"socket_mode": "0666",
                                    "app_uids": [APP_UID]})
    open_up(d.ctl)
    con = Console(env, d, uid=APP_UID)
    sign_in(drv, con)
    who = one(drv, "#whoami").text
    check("role app" in who and "uid:%d" % APP_UID in who, "whoami %r", who)
    check(not by_css(drv, 'a[href="#ceiling"]'), "a ceiling link for app")
    check(not by_css(drv, "#page-ceiling"), "a ceiling page for app")
    check(not by_css(drv, "#ceiling-tier, #ceiling-close"),
          "ceiling controls for app")
    check(not by_css(drv, 'a[href="#rules"], #page-rules'),
          "a rules page for app")
    # asking for it by its address shows another page
    drv.get(con.base + "/#ceiling")
    wait_for(lambda: one(drv, "#page-prompts") and
             one(drv, "#page-prompts").is_displayed(), 5,
             "the prompts page instead")
    check(not by_css(drv, "#page-ceiling"), "a ceiling page after #ceiling")
    # the sessions page: an app may change the tier of a session made
    # through the API (those of the configuration file are read-only)
    r = api_unix(d.ctl, "POST", "/v1/sessions", {
        "id": "chat-9000", "tenant": "acme", "user": "carol",
        "tier": "off", "source": env.src(3)})
    check_eq(r.status, 201, "POST /v1/sessions")
    drv.get(con.base + "/#sessions")
    sel = wait_for(lambda: one(drv, 'tr[data-session="chat-9000"] select'),
                   8, "a tier control for app")
    check(not one(drv, 'tr[data-session="chat-4711"] select'),
          "a tier control for a session of the configuration file")
    from selenium.webdriver.support.ui import Select
    Select(sel).select_by_value("registries")
    [b for b in by_css(drv, 'tr[data-session="chat-9000"] button')
     if b.text == "Set"][0].click()
    wait_until(lambda: api_unix(d.ctl, "GET", "/v1/sessions/chat-9000")
               .json["tier"] == "registries", 5, what="the app's tier change")
    recs = [json.loads(x) for x in open(d.log_path)]
    check([r for r in recs if r.get("action") == "session_set_tier" and
           r.get("who") == "uid:%d" % APP_UID and r.get("role") == "app"],
          "the change is the app uid's in the log")
    # the log is root's (0640): this user cannot read it, and says so
    drv.get(con.base + "/#log")
    wait_text(drv, "#log-summary", "Permission denied", 10,
              "the log page to say the log is not readable")
    wait_text(drv, "#chain-status", "Permission denied", 10,
              "the chain's status to say the same")
    con.finish()


@S.case
def rules_and_credentials(env):
    """An admin's Rules page lists the rules in the order requests meet
    them and the credentials by name and hosts, never a placeholder or a
    value; a request rule's prompt card shows the path and the rule."""
    drv = browser()
    up = env.http_upstream()
    secret = "npm_C0nsoleMustNeverShowThis_42"
    cfg = env.config(
        sessions=[{"id": "chat-4711", "tenant": "acme", "user": "alice",
                   "tier": "registries", "source": env.src(1)}],
        ceiling="public", registries=["reg.test"], ports=env.ports(up.port),
        dns={"hosts": {"reg.test": ["127.0.0.1"]}},
        tls={"plain_http_ports": [80, up.port]},
        inspect={"hosts": ["reg.test"],
                 "ca_cert": env.path("inspect-ca.pem"),
                 "ca_key": env.path("inspect-ca.key")},
        credentials={"file": env.path("credentials.json")},
        rules=[{"name": "ask-first", "hosts": ["reg.test:%d" % up.port],
                "paths": ["/ask/*"], "action": "prompt"}],
        prompt={"timeout_s": 90, "deny_quiet_s": 1})
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    d.up = up
    r = api_unix(d.ctl, "POST", "/v1/rules", {
        "name": "acme-no-put", "tenant": "acme", "hosts": ["reg.test"],
        "methods": ["PUT"], "action": "deny"})
    check_eq(r.status, 201, "POST /v1/rules")
    r = api_unix(d.ctl, "POST", "/v1/credentials", {
        "name": "npm", "tenant": "acme", "hosts": ["reg.test"],
        "inject": {"header": "Authorization", "format": "Bearer {}"},
        "value": secret})
    check_eq(r.status, 201, "POST /v1/credentials")
    placeholder = r.json["placeholder"]
    con = Console(env, d)
    sign_in(drv, con)
    drv.get(con.base + "/#rules")
    wait_for(lambda: one(drv, 'tr[data-credential="npm"]'), 10,
             "the credentials listed")
    names = [x.get_attribute("data-rule")
             for x in by_css(drv, "#rules-table tbody tr")]
    check_eq(names, ["ask-first", "acme-no-put",
                     "builtin:registries-read-only",
                     "builtin:git-receive-pack"], "rules in order")
    row = one(drv, 'tr[data-rule="acme-no-put"]').text
    for want in ("control API", "acme", "deny", "reg.test", "PUT"):
        check(want in row, "the rule's row lacks %r: %r", want, row)
    row = one(drv, 'tr[data-credential="npm"]').text
    for want in ("acme", "reg.test", "Authorization"):
        check(want in row, "the credential's row lacks %r: %r", want, row)
    page = drv.page_source
    check(secret not in page and placeholder not in page,
          "the page shows a value or a placeholder")
    # nor does the console's own answer carry the placeholder
    st, _, raw = con.request("GET", "/api/sluiced/v1/credentials", headers={
        "Cookie": "; ".join("%s=%s" % (c["name"], c["value"])
                            for c in drv.get_cookies())})
    check_eq(st, 200, "GET /api/sluiced/v1/credentials")
    check(placeholder.encode() not in raw and secret.encode() not in raw
          and b'"npm"' in raw, "the console's answer: %r" % raw[:300])
    # a request rule's prompt: method, path and rule on the card
    drv.get(con.base + "/#prompts")
    wait_for(lambda: one(drv, "#prompts-live").get_attribute("data-state")
             == "live", 10, "the event stream to be live")
    c = Curl(d, env.src(1), "http://reg.test:%d/ask/thing" % up.port)
    wait_for(lambda: len(cards(drv)) == 1, 15, "the rule's card")
    t = cards(drv)[0].text
    for want in ("GET reg.test:%d" % up.port, "/ask/thing", "ask-first"):
        check(want in t, "the card lacks %r: %r", want, t)
    pid = pending(d)[0]["id"]
    r = api_unix(d.ctl, "POST", "/v1/prompts/%s" % pid,
                 {"decision": "allow_once"})
    check_eq(r.status, 200, "allow_once")
    c.join(20)
    check_eq(c.code, 200, "the request went on")
    con.finish()


@S.case
def admin_sets_tenant_ceiling(env):
    drv = browser()
    from selenium.webdriver.support.ui import Select
    d = start_sluiced(env)
    con = Console(env, d)
    sign_in(drv, con)
    check("role admin" in one(drv, "#whoami").text, "not admin")
    drv.find_element("css selector", 'a[href="#ceiling"]').click()
    wait_for(lambda: one(drv, "#page-ceiling").is_displayed(), 5,
             "the ceiling page")
    wait_for(lambda: Select(one(drv, "#ceiling-tier"))
             .first_selected_option.get_attribute("value") == "public", 5,
             "the global ceiling shown")
    check(one(drv, "#tenants-empty").is_displayed(), "tenants listed")
    name = one(drv, "#tenant-name")
    name.send_keys("acme")
    Select(one(drv, "#tenant-tier")).select_by_value("off")
    one(drv, "#ceiling-close").click()
    one(drv, "#ceiling-tenant").find_element("css selector", "button").click()
    wait_for(lambda: one(drv, 'tr[data-tenant="acme"]'), 5,
             "the tenant's row")
    c = api_unix(d.ctl, "GET", "/v1/ceiling").json
    check_eq(c["tenants"], {"acme": "off"}, "tenant ceilings")
    wait_for(lambda: Select(one(drv, 'tr[data-tenant="acme"] select'))
             .first_selected_option.get_attribute("value") == "off", 5,
             "the row's ceiling")
    # the session of that tenant is now held to off
    s = api_unix(d.ctl, "GET", "/v1/sessions/chat-4711").json
    check_eq(s["effective_tier"], "off", "acme's session under an off ceiling")
    # change it in its row, then clear it
    act(lambda: Select(one(drv, 'tr[data-tenant="acme"] select'))
        .select_by_value("registries"), what="choosing in the row")
    act(lambda: one(drv, 'tr[data-tenant="acme"] button').click(),
        what="the row's Set")
    wait_until(lambda: api_unix(d.ctl, "GET", "/v1/ceiling").json["tenants"]
               == {"acme": "registries"}, 5, what="the row's change")
    act(lambda: by_css(drv, 'tr[data-tenant="acme"] button')[1].click(),
        what="the row's Clear")
    wait_until(lambda: api_unix(d.ctl, "GET", "/v1/ceiling").json["tenants"]
               == {}, 5, what="the tenant's ceiling cleared")
    wait_for(lambda: not by_css(drv, 'tr[data-tenant="acme"]'), 5,
             "the row to go")
    recs = [json.loads(line) for line in open(d.log_path)]
    sets = [r for r in recs if r.get("action") == "ceiling_set"]
    check(len(sets) == 3 and all(r["who"] == "root" for r in sets),
          "ceiling_set records %r", sets)
    # light and dark colour schemes, as the browser asks
    bg = "return getComputedStyle(document.body).backgroundColor;"
    check_eq(drv.execute_script(bg), "rgb(246, 247, 249)", "light background")
    try:
        drv.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
            {"name": "prefers-color-scheme", "value": "dark"}]})
        check_eq(drv.execute_script(bg), "rgb(13, 17, 23)", "dark background")
    finally:
        drv.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    con.finish()


@S.case
def refusals(env):
    drv = browser()
    d = start_sluiced(env)
    con = Console(env, d)
    # no token, a wrong one: nothing
    st, h, body = con.request("GET", "/")
    check_eq(st, 403, "GET / without the token")
    check("console.js" not in body.decode(), "the page without a session")
    check("default-src 'self'" in h.get("content-security-policy", ""),
          "CSP %r" % h)
    check_eq(h.get("x-frame-options"), "DENY", "X-Frame-Options")
    check_eq(h.get("cache-control"), "no-store", "Cache-Control")
    st, _, _ = con.request("GET", "/api/sluiced/v1/sessions")
    check_eq(st, 403, "the API without the token")
    st, _, _ = con.request("GET", "/?token=" + "0" * 64)
    check_eq(st, 403, "a wrong token")
    # a name that resolved to loopback is not loopback
    st, _, _ = con.request("GET", "/?token=" + con.token, host="evil.test")
    check_eq(st, 403, "the token under a foreign Host")

    sign_in(drv, con)
    # the browser is shared: other cases' consoles left theirs
    ck = [c for c in drv.get_cookies()
          if c["name"] == "sluice_console_%d" % con.port]
    check(len(ck) == 1, "cookies %r", drv.get_cookies())
    ck = ck[0]
    check(ck["httpOnly"] and ck.get("sameSite") == "Strict",
          "cookie attributes %r", ck)
    check_eq(drv.execute_script("return document.cookie;"), "",
             "the cookie is not readable by the page")
    cookie = {"Cookie": "%s=%s" % (ck["name"], ck["value"])}
    # the token worked once
    st, _, _ = con.request("GET", "/?token=" + con.token)
    check_eq(st, 403, "the token a second time")

    before = api_unix(d.ctl, "GET", "/v1/ceiling").json
    body = {"tier": "off", "close_exceeding": True}
    st, _, raw = con.request("PUT", "/api/sluiced/v1/ceiling", body,
                             dict(cookie, Origin="http://evil.test"))
    check_eq(st, 403, "a change from a foreign Origin")
    check(b"Origin" in raw, "refusal %r" % raw)
    st, _, _ = con.request("PUT", "/api/sluiced/v1/ceiling", body,
                           dict(cookie, Origin="http://127.0.0.1:%d"
                                % (con.port + 1)))
    check_eq(st, 403, "a change from another port")
    st, _, _ = con.request("PUT", "/api/sluiced/v1/ceiling", body, cookie)
    check_eq(st, 403, "a change without an Origin")
    st, _, _ = con.request("PUT", "/api/sluiced/v1/ceiling", body,
                           {"Origin": con.base})
    check_eq(st, 403, "a change without the cookie")
    check_eq(api_unix(d.ctl, "GET", "/v1/ceiling").json, before,
             "the ceiling after refused changes")

    # a page of another origin in the browser (another port: the same
    # site, so SameSite lets the cookie go) tries to answer a prompt and
    # to lower the ceiling, while the console is open in another tab
    drv.get(con.base + "/#prompts")
    wait_for(lambda: one(drv, "#prompts-live").get_attribute("data-state")
             == "live", 10, "the event stream to be live")
    c = Curl(d, env.src(1), "http://ask.test:%d/ok" % d.up.port)
    pid = wait_until(lambda: pending(d), 15, what="a prompt")[0]["id"]
    other = socketserver.TCPServer(("127.0.0.1", 0), _OtherPage)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    env.closers.append(other.server_close)
    env.closers.append(other.shutdown)
    _OtherPage.target = con.base
    _OtherPage.pid = pid
    console_tab = drv.current_window_handle
    drv.switch_to.new_window("tab")
    try:
        drv.get("http://127.0.0.1:%d/" % other.server_address[1])
        res = wait_for(lambda: drv.execute_script(
            "return window.__answer && window.__ceiling ? "
            "[window.__answer, window.__ceiling] : null;"), 10,
            "the other page's attempts")
        log("another origin's calls: %s" % res)
        # the answer is a simple request, sent without a preflight and
        # refused by the console (its answer, CORP same-origin, does not
        # reach the page either); the ceiling's PUT does not get past
        # the browser's preflight (OPTIONS: 405)
        check(res[1].startswith("error"), "the other origin's PUT: %r", res)
    finally:
        drv.close()
        drv.switch_to.window(console_tab)
    check_eq([p["id"] for p in pending(d)], [pid], "the prompt still waits")
    check_eq(api_unix(d.ctl, "GET", "/v1/ceiling").json, before,
             "the ceiling after the other origin's calls")
    check(card_for(drv, pid) is not None, "the card is still on the console")
    check(c.is_alive(), "the curl was answered")
    api_unix(d.ctl, "POST", "/v1/prompts/" + pid, {"decision": "deny"})
    c.join(20)
    check_eq(c.code, 403, "the curl after deny")
    check(not [r for r in (json.loads(x) for x in open(d.log_path))
               if r.get("action") == "ceiling_set"],
          "a ceiling_set record from the refused calls")

    # the console's own origin may
    st, _, raw = con.request("PUT", "/api/sluiced/v1/ceiling",
                             {"tier": "registries"},
                             dict(cookie, Origin=con.base))
    check_eq(st, 200, "a change from the console's origin (%r)" % raw)
    check_eq(api_unix(d.ctl, "GET", "/v1/ceiling").json["tier"],
             "registries", "the ceiling")
    con.finish()


class _OtherPage(socketserver.BaseRequestHandler):
    """A page on another port (another origin, the same site) that tries
    changes on the console with the browser's cookies."""
    target = None
    pid = None

    def handle(self):
        self.request.settimeout(5)
        try:
            self.request.recv(65536)
        except OSError:
            return
        t = json.dumps(self.target)
        page = ("<!doctype html><title>other</title><script>"
                # a simple request: sent without a preflight
                "fetch(%s + '/api/sluiced/v1/prompts/' + %s, {method: 'POST',"
                " mode: 'no-cors', credentials: 'include', headers: "
                "{'Content-Type': 'text/plain'}, body: "
                "'{\"decision\":\"allow_chat\"}'})"
                ".then(r => { window.__answer = 'sent ' + r.type; })"
                ".catch(e => { window.__answer = 'error ' + e; });"
                "fetch(%s + '/api/sluiced/v1/ceiling', {method: 'PUT', "
                "credentials: 'include', headers: {'Content-Type': "
                "'application/json'}, body: '{\"tier\":\"off\"}'})"
                ".then(r => { window.__ceiling = 'status ' + r.status; })"
                ".catch(e => { window.__ceiling = 'error ' + e; });"
                "</script>" % (t, json.dumps(self.pid), t)).encode()
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                             % len(page) + page)


@S.case
def hostile_text_stays_text(env):
    drv = browser()
    evil = "<img src=x onerror=\"window.__xss=1\">&amp;<b>bold</b>"
    d = start_sluiced(env, user=evil)
    con = Console(env, d)
    sign_in(drv, con)
    drv.get(con.base + "/#prompts")
    wait_for(lambda: one(drv, "#prompts-live").get_attribute("data-state")
             == "live", 10, "the event stream to be live")
    # the sandbox's own bytes: a path (sluiced refuses a raw "<" in
    # one, bad_request; the encoded form must stay as it is)
    path = "/%3Cb%3Ex%3C/b%3E?q=%3Cimg%20src=x%20onerror=window.__xss=2%3E"
    c = Curl(d, env.src(1), "http://ask.test:%d%s" % (d.up.port, path))
    wait_for(lambda: len(cards(drv)) == 1, 15, "the card")
    card = cards(drv)[0]
    check(evil in card.text, "the user as text: %r", card.text)
    shown = pending(d)[0]["path"]
    log("the path as sluiced shows it: %r" % shown)
    check(shown in card.text, "the path as text: %r", card.text)
    check(not card.find_elements("css selector", "img, b"),
          "markup from the session in the card")
    drv.get(con.base + "/#sessions")
    row = wait_for(lambda: one(drv, 'tr[data-session="chat-4711"]'), 8,
                   "the session row")
    check(evil in row.text, "the user as text in the row: %r", row.text)
    check(not row.find_elements("css selector", "img, b"),
          "markup from the session in the row")
    check(drv.execute_script("return window.__xss;") is None,
          "a script from the data ran")
    # answered from the keyboard: focus on Deny, then Enter
    from selenium.webdriver.common.keys import Keys
    drv.get(con.base + "/#prompts")
    deny = wait_for(lambda: one(drv, '#cards button[data-answer="deny"]'), 8,
                    "the card's Deny")
    drv.execute_script("arguments[0].focus();", deny)
    check(drv.switch_to.active_element == deny, "Deny did not take the focus")
    deny.send_keys(Keys.ENTER)
    c.join(20)
    check_eq(c.code, 403, "the denied curl")
    wait_for(lambda: not cards(drv), 5, "the card to go")
    con.finish()


class _FakeExec(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _FakeExecHandler(socketserver.StreamRequestHandler):
    """Just enough of sluice-execd's API on exec.sock."""
    docs = {
        "/v1/health": {"ok": False, "version": "0.1.0",
                       "default_backend": "ns",
                       "backends": [{"name": "ns", "ok": True, "reason": None},
                                    {"name": "gvisor", "ok": False,
                                     "reason": "runsc not found in PATH"}],
                       "broker": {"ok": True, "socket": "/run/x.sock",
                                  "reason": None},
                       "profiles": ["base"], "capacity": {}},
        "/v1/sandboxes": {"sandboxes": [{
            "id": "chat-4711", "tenant": "acme", "user": "alice",
            "state": "running", "backend": "ns", "profile": "base",
            "network": {"tier": "registries"},
            "usage": {"memory_mb": 42}, "last_used": "2026-01-01T00:00:00Z"}]},
        "/v1/sandboxes/chat-4711/commands": {"commands": [{
            "id": "c1", "status": "exited", "argv": ["pip", "install", "requests"],
            "exit_code": 0, "started": "2026-01-01T00:00:00Z",
            "ended": "2026-01-01T00:00:05Z"}]},
    }

    def handle(self):
        self.connection.settimeout(5)
        line = self.rfile.readline(8192).decode("latin-1").split()
        for _ in range(100):
            h = self.rfile.readline(8192)
            if h in (b"\r\n", b"\n", b""):
                break
        doc = self.docs.get(line[1] if len(line) > 1 else "")
        body = json.dumps(doc or {"error": {"code": "not_found",
                                            "message": "no"}}).encode()
        self.wfile.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                         % (200 if doc else 404, len(body)) + body)


@S.case
def executor_parts_follow_its_socket(env):
    drv = browser()
    d = start_sluiced(env)
    sock = env.path("exec.sock")
    con = Console(env, d, exec_socket=sock)
    sign_in(drv, con)
    drv.get(con.base + "/#sessions")
    wait_for(lambda: one(drv, 'tr[data-session="chat-4711"]'), 8,
             "the sessions page")
    box = one(drv, "[data-exec]")
    check(not box.is_displayed(), "sandboxes shown without an executor")
    drv.get(con.base + "/#health")
    wait_for(lambda: "Broker (sluiced)" in one(drv, "#health-broker").text, 8,
             "the broker's health")
    check_eq(one(drv, "#health-exec").text, "", "executor health without one")

    srv = _FakeExec(sock, _FakeExecHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env.closers.append(srv.server_close)
    env.closers.append(srv.shutdown)
    drv.get(con.base + "/#sessions")
    drv.refresh()
    wait_for(lambda: one(drv, 'tr[data-sandbox="chat-4711"]'), 10,
             "the sandbox row")
    check(one(drv, "[data-exec]").is_displayed(), "sandboxes hidden")
    row = one(drv, 'tr[data-sandbox="chat-4711"]')
    check("running" in row.text and "memory_mb 42" in row.text,
          "sandbox row %r", row.text)
    [b for b in row.find_elements("css selector", "button")
     if b.text == "Commands"][0].click()
    wait_for(lambda: "pip install requests" in one(drv, "#commands-table").text,
             5, "the recent commands")
    drv.get(con.base + "/#health")
    wait_for(lambda: "runsc not found in PATH" in one(drv, "#health-exec").text,
             8, "the backends with their reasons")
    # the executor goes: its parts go at the next look
    srv.shutdown()
    srv.server_close()
    os.unlink(sock)
    drv.get(con.base + "/#sessions")
    drv.refresh()
    wait_for(lambda: one(drv, 'tr[data-session="chat-4711"]'), 8,
             "the sessions page")
    time.sleep(0.5)
    check(not one(drv, "[data-exec]").is_displayed(),
          "sandboxes shown after the executor went")
    con.finish()


@S.case
def log_cut_and_changed(env):
    drv = browser()
    d = start_sluiced(env)
    d.skip_chain = True         # this case breaks it on purpose
    for t in ("registries", "public", "registries", "public"):
        check_eq(api_unix(d.ctl, "PUT", "/v1/ceiling", {"tier": t}).status,
                 200, "PUT /v1/ceiling")
    con = Console(env, d)
    sign_in(drv, con)
    drv.get(con.base + "/#log")
    wait_text(drv, "#chain-status", "holds the last record sluiced reports",
              10, "an intact chain")
    # the tail cut: the chain of what is left is right, but the record
    # sluiced wrote last is not there
    with open(d.log_path, "rb") as f:
        lines = f.read().splitlines(True)
    with open(d.log_path, "r+b") as f:
        f.truncate(sum(len(x) for x in lines[:-1]))
    one(drv, "#chain-verify").click()
    wait_text(drv, "#chain-status", "Chain broken", 10, "a cut tail found")
    log("cut tail: %s" % one(drv, "#chain-status").text)
    check(str(len(lines)) in one(drv, "#chain-status").text,
          "the missing seq named: %r", one(drv, "#chain-status").text)
    # a record changed in the middle, in a copy read with --log
    copy = env.path("copy.jsonl")
    rec = json.loads(lines[2])
    rec["who"] = "someone-else"
    with open(copy, "wb") as f:
        f.writelines(lines[:2] + [json.dumps(rec, separators=(",", ":"))
                                  .encode() + b"\n"] + lines[3:-1])
    con2 = Console(env, d, extra=("--log", copy))
    sign_in(drv, con2)
    drv.get(con2.base + "/#log")
    wait_text(drv, "#chain-status", "Chain broken at line 3", 10,
              "the changed record found")
    wait_text(drv, "#log-summary", copy, 10, "--log's file searched")
    con2.finish()
    con.finish()


class Execd(execdlib.Execd):
    """The real sluice-execd beside sluiced; stopped first (its sandboxes
    deleted while sluiced still answers, even when it died: execdlib),
    and nothing of them may be left."""

    def __init__(self, env, d):
        exe = execdlib.EXECD
        shim = os.path.join(BUILDDIR, "sandbox-glue", "shim", "sluice-shim")
        if os.geteuid() != 0:
            raise Skip("sluice-execd needs root")
        if not os.access(exe, os.X_OK):
            raise Fail("sluice-execd not built at %s" % exe)
        r = subprocess.run(["unshare", "-U", "-m", "-p", "-n", "-f", "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise Skip("no user namespaces: %s" % r.stderr.decode().strip())
        super().__init__(env, {"runtime_dir": env.path("xrun"),
                               "state_dir": env.path("xstate"),
                               "control_socket": d.ctl, "shim": shim},
                         verbose=False)
        self.start()

    def call(self, method, path, body=None):
        return api_unix(self.sock, method, path, body, timeout=60)


@S.case
def real_executor(env):
    drv = browser()
    from selenium.webdriver.support.ui import Select
    d = start_sluiced(env)
    x = Execd(env, d)
    r = x.call("POST", "/v1/sandboxes", {"id": "chat-5000", "tenant": "acme",
                                         "user": "dana",
                                         "network": {"tier": "registries"}})
    check_eq(r.status, 201, "create a sandbox (%r)" % r.body[:300])
    # ids are per tenant: sluiced's session of a tenant's sandbox is its
    # key, which the sandbox names
    sess = json.loads(r.body)["network"]["session"]
    r = x.call("POST", "/v1/sandboxes/chat-5000/commands",
               {"cmd": ["echo", "hello from the sandbox"]})
    check_eq(r.status, 202, "a background command (%r)" % r.body[:300])
    con = Console(env, d, exec_socket=x.sock)
    sign_in(drv, con)
    drv.get(con.base + "/#sessions")
    row = wait_for(lambda: one(drv, 'tr[data-sandbox="chat-5000"]'), 10,
                   "the sandbox's row")
    check("running" in row.text and "ns" in row.text and "dana" in row.text,
          "sandbox row %r", row.text)
    # its broker session, which the executor made
    wait_for(lambda: one(drv, 'tr[data-session="%s"]' % sess), 8,
             "the sandbox's broker session")
    act(lambda: [b for b in one(drv, 'tr[data-sandbox="chat-5000"]')
                 .find_elements("css selector", "button")
                 if b.text == "Commands"][0].click(), what="Commands")
    wait_text(drv, "#commands-table", "echo hello from the sandbox", 8,
              "the recent commands")
    # the tier, through the executor, reaches sluiced's session
    act(lambda: Select(one(drv, 'tr[data-sandbox="chat-5000"] select'))
        .select_by_value("public"), what="choosing a tier")
    act(lambda: [b for b in by_css(drv, 'tr[data-sandbox="chat-5000"] button')
                 if b.text == "Set"][0].click(), what="Set")
    wait_until(lambda: api_unix(d.ctl, "GET", "/v1/sessions/" + sess).json
               .get("tier") == "public", 10, what="the broker session's tier")
    drv.get(con.base + "/#health")
    wait_text(drv, "#health-exec", "no kvm (microVM) backend in this build",
              10, "the executor's backends with their reasons")
    # destroyed from the page: the sandbox and its broker session go
    drv.get(con.base + "/#sessions")
    wait_for(lambda: one(drv, 'tr[data-sandbox="chat-5000"]'), 10,
             "the sandbox's row")

    def destroy():
        b = [b for b in by_css(drv, 'tr[data-sandbox="chat-5000"] button')
             if b.text in ("Destroy", "Really destroy?")][0]
        b.click()
        if b.text == "Really destroy?":
            b.click()
    act(destroy, what="Destroy, twice")
    wait_until(lambda: x.call("GET", "/v1/sandboxes").json["sandboxes"] == [],
               30, what="the sandbox to go")
    wait_until(lambda: api_unix(d.ctl, "GET", "/v1/sessions/" + sess).status
               == 404, 10, what="its broker session to go")
    wait_for(lambda: not one(drv, 'tr[data-sandbox="chat-5000"]'), 10,
             "the row to go")
    con.finish()


S.main()
