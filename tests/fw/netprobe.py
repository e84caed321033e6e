#!/usr/bin/env python3
"""netprobe.py: small, bounded traffic tools for t_fw_veth.sh.

  tcp-listen SECONDS ADDR:PORT...   accept on each, answer "ok\\n", close;
                                    exits after SECONDS
  http-serve SECONDS ADDR:PORT FILE  answer every request with 200 and
                                    FILE's bytes; exits after SECONDS
  tcp-probe TIMEOUT ADDR PORT [SRC] connect (from SRC); prints "open" (exit 0),
                                    "refused" (exit 2), "timeout" (exit 3),
                                    "error <errno>" (exit 4)
  udp-count SECONDS OUT ADDR:PORT...
                                    count datagrams per address; OUT is
                                    rewritten (atomically) with
                                    "ADDR count" lines every 0.1 s
  udp-send COUNT INTERVAL_MS PORT ADDR...
                                    COUNT rounds, one datagram to each
                                    ADDR per round; prints "sent N
                                    refused M" (sendto refused by the
                                    output hook: EPERM)

Addresses are IPv4 or IPv6 (ADDR:PORT is then [V6]:PORT; tcp-probe takes
the bare V6).  Every loop is bounded in count and in time; nothing here
picks its own targets: the caller passes addresses of its own namespaces.
"""
import errno
import os
import selectors
import socket
import sys
import time


def parse(ap):
    """ADDR:PORT or [V6]:PORT to (host, port)."""
    host, _, port = ap.rpartition(":")
    return host.strip("[]"), int(port)


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def tcp_listen(seconds, addrs):
    sel = selectors.DefaultSelector()
    for ap in addrs:
        s = socket.socket(family(parse(ap)[0]), socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(parse(ap))
        s.listen(16)
        sel.register(s, selectors.EVENT_READ)
    # ready for the caller: a line on stdout
    print("listening", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.2):
            try:
                c, _ = key.fileobj.accept()
                c.settimeout(1)
                c.sendall(b"ok\n")
                c.close()
            except OSError:
                pass
    return 0


def http_serve(seconds, ap, path):
    with open(path, "rb") as f:
        body = f.read()
    s = socket.socket(family(parse(ap)[0]), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(parse(ap))
    s.listen(16)
    s.settimeout(0.2)
    print("listening", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        try:
            c.settimeout(2)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = c.recv(4096)
                if not chunk:
                    break
                head += chunk
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n" % len(body) + body)
        except OSError:
            pass
        finally:
            c.close()
    return 0


def sockaddr(host, port):
    """(host, port), or the 4-tuple of a scoped IPv6 address
    ("fe80::1%eth0"), which connect() takes only with its scope id."""
    if "%" not in host:
        return (host, port)
    return socket.getaddrinfo(host, port, socket.AF_INET6,
                              socket.SOCK_STREAM, 0,
                              socket.AI_NUMERICHOST)[0][4]


def tcp_probe(timeout, addr, port, src=None):
    s = socket.socket(family(addr), socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        if src is not None:
            s.bind(sockaddr(src, 0))
        s.connect(sockaddr(addr, port))
    except socket.timeout:
        print("timeout")
        return 3
    except ConnectionRefusedError:
        print("refused")
        return 2
    except OSError as e:
        # EPERM: dropped by the local output hook
        print("error %s" % errno.errorcode.get(e.errno, e.errno))
        return 4
    finally:
        s.close()
    print("open")
    return 0


def udp_count(seconds, out, addrs):
    sel = selectors.DefaultSelector()
    counts = {}
    for ap in addrs:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(parse(ap))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, ap.rpartition(":")[0])
        counts[ap.rpartition(":")[0]] = 0

    def dump():
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            for a in sorted(counts):
                f.write("%s %d\n" % (a, counts[a]))
        os.rename(tmp, out)

    dump()
    end = time.monotonic() + seconds
    last = 0.0
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.05):
            while True:
                try:
                    key.fileobj.recv(2048)
                except BlockingIOError:
                    break
                counts[key.data] += 1
        if time.monotonic() - last >= 0.1:
            dump()
            last = time.monotonic()
    dump()
    return 0


def udp_send(count, interval_ms, port, addrs):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = refused = 0
    t0 = time.monotonic()
    for i in range(count):
        for a in addrs:
            try:
                s.sendto(b"%d" % i, (a, port))
                sent += 1
            except OSError as e:
                if e.errno != errno.EPERM:
                    raise
                refused += 1
        # a fixed rate: round i starts at t0 + i * interval
        delay = t0 + (i + 1) * interval_ms / 1000.0 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    print("sent %d refused %d" % (sent, refused))
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    cmd, a = argv[1], argv[2:]
    if cmd == "tcp-listen":
        return tcp_listen(float(a[0]), a[1:])
    if cmd == "http-serve":
        return http_serve(float(a[0]), a[1], a[2])
    if cmd == "tcp-probe":
        return tcp_probe(float(a[0]), a[1], int(a[2]),
                         a[3] if len(a) > 3 else None)
    if cmd == "udp-count":
        return udp_count(float(a[0]), a[1], a[2:])
    if cmd == "udp-send":
        return udp_send(min(int(a[0]), 100000), float(a[1]), int(a[2]),
                        a[3:])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
