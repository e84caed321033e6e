"""Checking the prompts sluiced(8) POSTs to a webhook.

Each delivery carries ``X-Sluice-Timestamp`` (Unix seconds) and
``X-Sluice-Signature``: ``"sha256=" + hex(HMAC-SHA256(secret,
"<timestamp>.<body>"))`` with the secret of ``webhook.secret_file``.
A receiver checks it over the raw body before it trusts a byte::

    from sluice import webhook
    if not webhook.verify(secret, headers["X-Sluice-Timestamp"], raw_body,
                          headers["X-Sluice-Signature"]):
        return 401

and answers 2xx, optionally with ``{"decision": "allow_once"}``,
``"allow_chat"`` or ``"deny"``.  ``X-Sluice-Delivery`` (the prompt id) is
the same on every retry, so repeats can be dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Optional, Union

__all__ = ["sign", "verify", "DEFAULT_TOLERANCE_S"]

DEFAULT_TOLERANCE_S = 300
Bytes = Union[str, bytes, bytearray, memoryview]


def _b(v: Bytes) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


def _secret(secret: Bytes) -> bytes:
    # sluiced keeps the secret file's bytes less trailing line ends
    return _b(secret).rstrip(b"\r\n")


def sign(secret: Bytes, timestamp: Union[str, int], body: Bytes) -> str:
    """The ``X-Sluice-Signature`` value sluiced would send."""
    msg = str(timestamp).encode("ascii") + b"." + _b(body)
    return "sha256=" + hmac.new(_secret(secret), msg, hashlib.sha256).hexdigest()


def verify(secret: Bytes, timestamp: Union[str, int, None], body: Bytes,
           signature: Optional[str], *,
           tolerance_s: Optional[float] = DEFAULT_TOLERANCE_S,
           now: Optional[float] = None) -> bool:
    """True when ``signature`` is the HMAC-SHA256 of ``"<timestamp>.<body>"``
    with ``secret`` (compared in constant time) and the timestamp is within
    ``tolerance_s`` seconds of ``now`` (None: any age).  ``body`` must be
    the raw bytes received, not re-serialised JSON."""
    if timestamp is None or signature is None:
        return False
    ts = str(timestamp).strip()
    if not ts.isdigit() or len(ts) > 12:
        return False
    if tolerance_s is not None:
        t = time.time() if now is None else now
        if abs(t - int(ts)) > tolerance_s:
            return False
    want = sign(secret, ts, body)
    got = signature.strip()
    return hmac.compare_digest(want.encode("ascii"),
                               got.encode("utf-8", "replace"))
