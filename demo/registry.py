#!/usr/bin/env python3
"""A PyPI-like simple index on loopback, for the demo and the tests.

As a program: build the index under ROOT and serve it (and any other file
under ROOT) on 127.0.0.1:PORT until killed.  As a module: make_index()
and serve_forever() for tests that want the same registry.
The wheel is written by hand so that nothing is fetched to build it."""

import argparse
import base64
import functools
import hashlib
import http.server
import os
import sys
import zipfile

PKG, VER = "sluicedemo", "1.0"


def make_wheel(directory):
    """A minimal pure-Python wheel; returns (file name, sha256)."""
    name = "%s-%s-py3-none-any.whl" % (PKG, VER)
    path = os.path.join(directory, name)
    files = {
        "%s/__init__.py" % PKG: b"VALUE = 42\n",
        "%s-%s.dist-info/METADATA" % (PKG, VER):
            b"Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (
                PKG.encode(), VER.encode()),
        "%s-%s.dist-info/WHEEL" % (PKG, VER):
            b"Wheel-Version: 1.0\nGenerator: sluice-demo\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for n, data in files.items():
        digest = base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (n, digest, len(data)))
    rec_name = "%s-%s.dist-info/RECORD" % (PKG, VER)
    record.append("%s,," % rec_name)
    with zipfile.ZipFile(path, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
        z.writestr(rec_name, "\n".join(record) + "\n")
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    return name, sha


def make_index(root):
    """ROOT/simple/index.html, ROOT/simple/PKG/index.html, ROOT/files/*.whl"""
    pkgdir = os.path.join(root, "simple", PKG)
    os.makedirs(pkgdir, exist_ok=True)
    os.makedirs(os.path.join(root, "files"), exist_ok=True)
    name, sha = make_wheel(os.path.join(root, "files"))
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write('<html><body><a href="%s/">%s</a></body></html>\n' % (PKG, PKG))
    with open(os.path.join(pkgdir, "index.html"), "w") as f:
        f.write('<html><body><a href="../../files/%s#sha256=%s">%s</a>'
                '</body></html>\n' % (name, sha, name))


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, required=True)
    a = ap.parse_args()
    make_index(a.root)
    handler = functools.partial(Quiet, directory=a.root)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), handler)
    srv.daemon_threads = True
    print("registry on 127.0.0.1:%d" % a.port, file=sys.stderr, flush=True)
    srv.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()
