"""A WebSocket echo server (RFC 6455, Python's standard library only)
that t_opensandbox's ports case runs inside a sandbox on 127.0.0.1:PORT
(the first argument): each message comes back prefixed "echo:"; a close
is answered with a close."""
import base64
import hashlib
import socket
import struct
import sys
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def serve(c):
    data = b""
    while b"\r\n\r\n" not in data:
        d = c.recv(4096)
        if not d:
            return
        data += d
    head, buf = data.split(b"\r\n\r\n", 1)
    keys = [ln.split(":", 1)[1].strip() for ln in
            head.decode("latin-1").split("\r\n")
            if ln.lower().startswith("sec-websocket-key:")]
    if not keys:
        c.sendall(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        c.close()
        return
    key = keys[0]
    acc = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc +
              b"\r\n\r\n")

    def need(n):
        nonlocal buf
        while len(buf) < n:
            d = c.recv(65536)
            if not d:
                raise EOFError
            buf += d
        r, buf = buf[:n], buf[n:]
        return r

    try:
        while True:
            b0, b1 = need(2)
            op, ln = b0 & 15, b1 & 127
            if ln == 126:
                ln = struct.unpack(">H", need(2))[0]
            elif ln == 127:
                ln = struct.unpack(">Q", need(8))[0]
            mask = need(4) if b1 & 128 else b"\0\0\0\0"
            p = bytes(x ^ mask[i % 4] for i, x in enumerate(need(ln)))
            if op == 8:
                c.sendall(b"\x88\x00")
                break
            if op not in (1, 2):
                continue
            r = b"echo:" + p
            n = len(r)
            h = bytes([0x80 | op]) + (
                bytes([n]) if n < 126 else
                b"\x7e" + struct.pack(">H", n) if n < 65536 else
                b"\x7f" + struct.pack(">Q", n))
            c.sendall(h + r)
    except EOFError:
        pass
    c.close()


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
