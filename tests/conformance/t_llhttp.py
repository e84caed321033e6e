#!/usr/bin/env python3
"""sluice's request parser against the request tests of nodejs/llhttp.

The corpus is read where it lies, never copied into this tree: from
$SLUICE_LLHTTP_CORPUS, else ../shared/llhttp/corpus beside the top of the
source tree (its COMMIT file names the llhttp commit; MIT licence, see its
LICENSE-llhttp).  Without it the test is skipped (77), which
SLUICE_TEST_STRICT=1 turns into a failure.

Each test's input is rebuilt as llhttp's test/md-test.ts does and run
through tests/conformance/http_check (sluice's head parser, method and
target rules and body framer, as sluiced applies them).  The result is
compared with llhttp's expectation in strict mode: the outcome (accepted,
refused, incomplete at the end, handed to a tunnel) and, for every
request whose head both accepted, method, target, version, header fields
and where the head and the body end.  For the request-lenient-* tests the
log shows llhttp with a leniency flag; without it (strict) llhttp refuses
what the flag admits, so the strict expectation there is a refusal (where
in the stream is not known, so only the outcome is compared).

Every difference must be listed in KNOWN with its reason, and every entry
of KNOWN must still be a difference: the table stays exactly the set of
deliberate differences.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

EXIT_PASS, EXIT_FAIL, EXIT_SKIP = 0, 1, 77
STRICT = os.environ.get("SLUICE_TEST_STRICT") == "1"
SRCDIR = os.environ.get("SLUICE_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILDDIR = os.environ.get("SLUICE_BUILDDIR") or SRCDIR

# (file, test heading) -> (kind, why sluice differs from llhttp's strict
# mode).  Each kind is checked, not just named:
#   stricter  llhttp accepts (or hands over to a tunnel), sluice refuses;
#   later     llhttp refuses within a head that the input never ends,
#             sluice judges a line when its CRLF arrives and the fields'
#             meaning when the head is complete, so it has accepted
#             nothing yet, and it refuses the same bytes once a CRLF ends
#             the line and another the head (the test tries that);
#   harness   the llhttp test relies on a callback of its test harness.
# The reasons are the rules of sluiced(8), "Requests".
NOT_REGISTERED = ("not a method of the IANA HTTP Method Registry; sluice "
                  "refuses unregistered methods (method_not_allowed) "
                  "rather than guess how an upstream frames them")
ONLY_HTTP = ("only HTTP/1.0 and HTTP/1.1 are accepted: RTSP and ICE are "
             "other protocols on a proxy for HTTP")
OBS_TEXT = ("header values are VCHAR, SP and HTAB only: obs-text (bytes "
            "0x80-0xff) is refused, so a header means the same to every "
            "recipient whatever character set it assumes")
ONE_TE = ("a request's Transfer-Encoding must be exactly one line saying "
          "chunked: its body goes upstream as it came, and any other coding "
          "or a second line is one more way to frame it differently")
LATER = "a line is judged when its CRLF arrives, framing when the head ends"
KNOWN = {
    ("content-length.md", "Error on `Content-Length` overflow"):
        ("later", LATER),
    ("content-length.md", "Error on duplicate `Content-Length`"):
        ("later", LATER),
    ("invalid.md", "Invalid HTTP version"): ("later", LATER),
    ("invalid.md", "Invalid space after start line"): ("later", LATER),
    ("content-length.md", "Content-Length reset when no body is received"):
        ("harness", "skipBody is llhttp's on_headers_complete telling the "
         "parser that a message has no body (as for an answer to HEAD); "
         "nothing in a request stream does that, so sluice reads the 123 "
         "bytes as the body"),
    ("method.md", "CONNECT with body"):
        ("stricter", "a CONNECT with a body is refused: after its head the "
         "bytes belong to the tunnel, and a Content-Length there would make "
         "an intermediary read part of the tunnel as a body"),
    ("method.md", "M-SEARCH request"): ("stricter", NOT_REGISTERED),
    ("method.md", "PURGE request"): ("stricter", NOT_REGISTERED),
    ("method.md", "SOURCE request"): ("stricter", NOT_REGISTERED),
    ("method.md", "SOURCE request with ICE"): ("stricter", ONLY_HTTP),
    ("method.md", "OPTIONS request with RTSP"): ("stricter", ONLY_HTTP),
    ("method.md", "ANNOUNCE request with RTSP"): ("stricter", ONLY_HTTP),
    ("sample.md", "No HTTP version"):
        ("stricter", "HTTP/0.9 (a request line without a version) is "
         "refused: it has no headers, so no Host to check"),
    ("sample.md", "Extended Characters"): ("stricter", OBS_TEXT),
    ("sample.md", "255 ASCII in header value"): ("stricter", OBS_TEXT),
    ("transfer-encoding.md", "POST with `chunked` as last transfer-encoding"):
        ("stricter", ONE_TE),
    ("transfer-encoding.md",
     "POST with `chunked` as last transfer-encoding (multiple headers)"):
        ("stricter", ONE_TE),
    ("uri.md", "Host terminated by a query string"):
        ("stricter", "an absolute-form target needs a path after its "
         "authority (clients send http://host/?query): where the host ends "
         "is then plain to every recipient"),
    ("uri.md", "`host:port` terminated by a query string"):
        ("stricter", "an absolute-form target needs a path after its "
         "authority (clients send http://host:port/?query)"),
    ("uri.md", "`host:port` and basic auth"):
        ("stricter", "userinfo in the target is refused (bad_target): the "
         "host a policy decides on must be the only name in the URI"),
}


def corpus_dir():
    d = os.environ.get("SLUICE_LLHTTP_CORPUS")
    if d:
        return d
    return os.path.normpath(os.path.join(SRCDIR, "..", "shared", "llhttp",
                                         "corpus"))


# ---------------------------------------------------------------------------
# The markdown files: "# heading" lines, then per test a meta comment, an
# ```http block and a ```log block.

FENCE = re.compile(r"^```(\w*)\s*$")
META = re.compile(r"^<!--\s*meta=(\{.*\})\s*-->\s*$")
HEADING = re.compile(r"^#+\s+(.*?)\s*$")


def read_tests(path):
    tests, heading, meta, http = [], None, None, None
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = FENCE.match(ln)
        if m and m.group(1) in ("http", "log"):
            body = []
            i += 1
            while i < len(lines) and not FENCE.match(lines[i]):
                body.append(lines[i])
                i += 1
            if m.group(1) == "http":
                http = body
            elif meta is not None and http is not None:
                tests.append({"name": heading, "meta": meta,
                              "http": http, "log": body})
                meta = http = None
        elif META.match(ln):
            meta = json.loads(META.match(ln).group(1))
        elif HEADING.match(ln) and not ln.startswith("#!"):
            heading = HEADING.match(ln).group(1)
        elif ln.startswith("===") and i > 0:
            heading = lines[i - 1].strip()
        i += 1
    return tests


def build_input(lines):
    """The input bytes as llhttp's test/md-test.ts makes them."""
    s = "\n".join(lines)
    s = re.sub(r"\\(\r\n|\r|\n)", "", s)          # escaped newlines
    s = re.sub(r"\r\n|\r|\n", "\r\n", s)          # every newline is CRLF
    s = s.replace("\\r", "\r").replace("\\n", "\n")
    s = s.replace("\\t", "\t").replace("\\f", "\f")
    s = re.sub(r"\\x([0-9a-fA-F]+)", lambda m: chr(int(m.group(1), 16)), s)
    s = re.sub(r"\\([0-7]{1,3})", lambda m: chr(int(m.group(1), 8)), s)
    if "${" in s:
        raise ValueError("inline JavaScript in a test input")
    return s.encode("utf-8")


LOG = re.compile(r"^off=(\d+|NULL) (.*)$")
SPAN = re.compile(r'^len=\d+ span\[(\w+)\]="(.*)"$')


def expectation(test):
    """llhttp's strict-mode result from a test's log."""
    msgs, cur, outcome = [], None, None
    field = value = None

    def end_header():
        nonlocal field, value
        if cur is not None and field is not None and "head_end" not in cur:
            cur["headers"].append([field, (value or "").strip(" \t")])
        field = value = None

    for ln in test["log"]:
        m = LOG.match(ln.strip())
        if not m:
            continue
        off, ev = m.group(1), m.group(2)
        sp = SPAN.match(ev)
        if ev == "message begin":
            cur = {"method": "", "url": "", "version": "", "headers": [],
                   "end": None}
            msgs.append(cur)
        elif sp and cur is not None:
            kind, text = sp.group(1), sp.group(2).replace("\\t", "\t") \
                .replace("\\f", "\f")
            if kind == "header_field":
                if value is not None:
                    end_header()
                field = (field or "") + text
            elif kind == "header_value":
                value = (value or "") + text
            elif kind in ("method", "url", "version"):
                cur[kind] += text
        elif ev == "header_value complete":
            end_header()
        elif ev.startswith("headers complete") and cur is not None:
            end_header()
            cur["head_end"] = int(off)
        elif ev == "message complete" and cur is not None:
            cur["end"] = int(off)
        elif ev.startswith("error code="):
            code = int(ev.split()[1].split("=")[1])
            # 22 and 23: llhttp pauses to hand the connection over
            # (CONNECT, Upgrade, the HTTP/2 preface); not a refusal
            outcome = "upgrade" if code in (22, 23) else "error"
            break
        elif ev.startswith("finish="):
            outcome = "ok" if ev == "finish=0" else "incomplete"
    done = [x for x in msgs if "head_end" in x]
    if outcome is None:
        outcome = "ok" if all(x["end"] is not None for x in msgs) \
            else "incomplete"
    for x in done:
        x["version"] = x["version"] or "?"
    lenient = test["meta"].get("type", "request").startswith(
        "request-lenient")
    if lenient:
        # strict llhttp refuses what the flag admits, maybe earlier than
        # the log shows: only the outcome is compared
        return "error", None
    return outcome, done


def sluice_result(tool, data):
    with tempfile.NamedTemporaryFile(prefix="sluice-llhttp.") as f:
        f.write(data)
        f.flush()
        r = subprocess.run([tool, f.name], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20)
    if r.returncode != 0:
        raise RuntimeError("http_check exit %d: %s" % (
            r.returncode, r.stderr.decode(errors="replace")))
    return json.loads(r.stdout.decode())


def compare(exp_outcome, exp_msgs, got):
    """None when they agree, else a one-line account of the difference."""
    outcome = got["outcome"]
    # sluice closes after a request that does not keep the connection,
    # where llhttp refuses data after it: both stop using the bytes
    if outcome == "closed" and exp_outcome == "error":
        outcome = "error"
    # CONNECT: llhttp pauses, sluice hands the bytes to the tunnel
    if outcome == "tunnel" and exp_outcome == "upgrade":
        outcome = "upgrade"
    gmsgs = got["messages"]
    if exp_outcome == "upgrade" and outcome != "upgrade":
        # Upgrade: llhttp stops after the message; sluice strips the
        # hop-by-hop Upgrade header and reads on, so only the messages up
        # to the upgrade are comparable
        if len(gmsgs) >= len(exp_msgs):
            gmsgs = gmsgs[:len(exp_msgs)]
            outcome = "upgrade"
    if outcome != exp_outcome:
        return "outcome: llhttp %s, sluice %s (%s%s)" % (
            exp_outcome, got["outcome"], got.get("reason"),
            ": " + got["why"] if got.get("why") else "")
    if exp_msgs is None:
        return None
    if outcome == "error":
        # the two detect an error at different bytes: compare the
        # requests that both saw to their end
        exp_msgs = [m for m in exp_msgs if m["end"] is not None]
        gmsgs = [m for m in gmsgs if m["end"] is not None]
    if len(gmsgs) != len(exp_msgs):
        return "%d requests for llhttp, %d for sluice" % (len(exp_msgs),
                                                          len(gmsgs))
    for i, (e, g) in enumerate(zip(exp_msgs, gmsgs)):
        for k in ("method", "url", "version", "headers", "head_end", "end"):
            if e[k] != g[k]:
                return "request %d: %s: llhttp %r, sluice %r" % (
                    i + 1, k, e[k], g[k])
    return None


def check_kind(kind, exp_outcome, got, tool, data):
    """None if the difference is of the kind KNOWN says, else what is not."""
    if kind == "stricter":
        if exp_outcome == "error":
            return "llhttp refuses it too"
        if got["outcome"] != "error":
            return "sluice does not refuse it"
        return None
    if kind == "later":
        if exp_outcome != "error" or got["outcome"] != "incomplete":
            return "it is not llhttp refusing what sluice waits for"
        if got["messages"] and got["messages"][-1]["end"] is None:
            return "sluice waits in a body, not in a head"
        done = sluice_result(tool, data + b"\r\n\r\n")
        if done["outcome"] != "error":
            return "sluice does not refuse it once the head is complete"
        return None
    if kind == "harness":
        return None
    return "no such kind"


def main():
    cdir = corpus_dir()
    tool = os.path.join(BUILDDIR, "tests", "conformance", "http_check")
    if not os.path.isdir(cdir):
        print("# SKIP: no llhttp corpus at %s (set SLUICE_LLHTTP_CORPUS)"
              % cdir)
        if STRICT:
            print("# SLUICE_TEST_STRICT=1: skip counts as failure")
            return EXIT_FAIL
        return EXIT_SKIP
    commit = open(os.path.join(cdir, "COMMIT")).read().strip()
    print("# corpus: %s (%s)" % (cdir, commit))
    files = sorted(f for f in os.listdir(cdir) if f.endswith(".md"))
    seen, agree, failures, differ = set(), 0, [], {}
    total = 0
    for fn in files:
        counts = {}
        for t in read_tests(os.path.join(cdir, fn)):
            name = t["name"]
            counts[name] = counts.get(name, 0) + 1
            if counts[name] > 1:
                name = "%s (%d)" % (name, counts[name])
            key = (fn, name)
            total += 1
            try:
                data = build_input(t["http"])
                exp_outcome, exp_msgs = expectation(t)
                got = sluice_result(tool, data)
            except (ValueError, RuntimeError, OSError) as e:
                failures.append("%s: %s: cannot run: %s" % (fn, name, e))
                continue
            diff = compare(exp_outcome, exp_msgs, got)
            if diff is None:
                agree += 1
                if key in KNOWN:
                    seen.add(key)
                    failures.append("%s: %s: listed in KNOWN but agrees "
                                    "with llhttp now" % key)
                continue
            differ[key] = diff
            if key not in KNOWN:
                failures.append("%s: %s: %s" % (fn, name, diff))
                continue
            seen.add(key)
            kind, why = KNOWN[key]
            bad = check_kind(kind, exp_outcome, got, tool, data)
            if bad:
                failures.append("%s: %s: listed as %s, but %s (%s)" % (
                    fn, name, kind, bad, diff))
            else:
                print("# known (%s): %s: %s: %s -- %s" % (kind, fn, name,
                                                          diff, why))
    for key in KNOWN:
        if key not in seen:
            failures.append("%s: %s: listed in KNOWN but not in the corpus"
                            % key)
    print("# %d tests: %d agree, %d known differences" % (
        total, agree, len([k for k in differ if k in KNOWN])))
    for f in failures:
        print("FAIL: %s" % f)
    if total < 100:
        print("FAIL: only %d tests read from the corpus" % total)
        return EXIT_FAIL
    if failures:
        return EXIT_FAIL
    print("PASS: t_llhttp")
    return EXIT_PASS


if __name__ == "__main__":
    sys.exit(main())
