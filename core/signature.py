"""Webhook signatures: ``Dejaq-Signature: t=<ms>,v1=<hex>``.

``v1`` is the HMAC-SHA256, keyed with the topic's signing secret (its UTF-8
bytes), of ``<t>.<body>``: the signing time in ms since the epoch, a dot, and
the request body as sent. A receiver recomputes it, compares in constant time,
and refuses a ``t`` too far from its own clock (a replayed request). The
scheme is Stripe's, so their libraries' habits carry over.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_MS = 5 * 60 * 1000


def new_secret() -> str:
    """A fresh signing secret: 32 random bytes, URL-safe text."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def digest(secret: str, t_ms: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{t_ms}.".encode() + body, hashlib.sha256)
    return mac.hexdigest()


def sign(secret: str, t_ms: int, body: bytes) -> str:
    """The ``Dejaq-Signature`` header value for ``body`` signed at ``t_ms``."""
    return f"t={t_ms},v1={digest(secret, t_ms, body)}"


def verify(
    secret: str, header: str, body: bytes, now_ms: int, tolerance_ms: int = DEFAULT_TOLERANCE_MS
) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` within ``tolerance_ms`` of ``now_ms``."""
    t_ms: int | None = None
    given: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            t_ms = int(value)
        elif key == "v1":
            given.append(value)
    if t_ms is None or abs(now_ms - t_ms) > tolerance_ms:
        return False
    expected = digest(secret, t_ms, body)
    return any(hmac.compare_digest(expected, v) for v in given)
