"""Checks of a topic's webhook settings, and its signing secret.

The target's address is checked against the operator's allowlist too
(``broker/webhook_targets.py``), and again on every connection.
"""

from __future__ import annotations

import dataclasses
import re

from dejaq.broker import webhook_targets as targets
from dejaq.core import signature
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import Webhook

MAX_URL = 2048
MIN_TIMEOUT_MS = 100
MAX_TIMEOUT_MS = 15 * 60 * 1000
MAX_CONCURRENCY = 10_000
MAX_HEADERS = 32
MAX_HEADER_VALUE = 4096
MIN_BACKOFF_MS = 10
MAX_BACKOFF_MS = 3600 * 1000
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")  # an RFC 9110 token
# Headers the broker writes itself (and Dejaq-*), or that would break the request.
RESERVED = {"host", "content-length", "transfer-encoding", "connection", "upgrade"}
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
SECRET = re.compile(r"[\x21-\x7e]{16,256}")


def webhook(w: Webhook) -> Webhook:
    """A webhook's settings, checked; the address is checked by ``allowed``."""
    if len(w.url) > MAX_URL:
        raise InvalidArgument(f"webhook URL is longer than {MAX_URL} characters")
    targets.target_host(w.url)
    if not MIN_TIMEOUT_MS <= w.timeout_ms <= MAX_TIMEOUT_MS:
        raise InvalidArgument(
            f"webhook timeout must be between {MIN_TIMEOUT_MS} ms and 15 min, not {w.timeout_ms} ms"
        )
    if not 1 <= w.concurrency <= MAX_CONCURRENCY:
        raise InvalidArgument(
            f"webhook concurrency must be between 1 and {MAX_CONCURRENCY}, not {w.concurrency}"
        )
    if not MIN_BACKOFF_MS <= w.backoff_ms <= MAX_BACKOFF_MS:
        raise InvalidArgument(
            f"webhook backoff must be between {MIN_BACKOFF_MS} ms and 1 h, not {w.backoff_ms} ms"
        )
    headers(w.headers)
    if w.secret and not SECRET.fullmatch(w.secret):
        raise InvalidArgument(
            "webhook secret must be 16-256 printable ASCII characters without spaces"
        )
    return w


def headers(pairs: tuple[tuple[str, str], ...]) -> None:
    if len(pairs) > MAX_HEADERS:
        raise InvalidArgument(f"a webhook carries at most {MAX_HEADERS} headers")
    for name, value in pairs:
        if not HEADER_NAME.fullmatch(name):
            raise InvalidArgument(f"webhook header name {name!r} is not a valid header name")
        lower = name.lower()
        if lower in RESERVED or lower.startswith("dejaq-"):
            raise InvalidArgument(f"webhook header {name!r} is set by the broker")
        if len(value) > MAX_HEADER_VALUE or not HEADER_VALUE.fullmatch(value):
            raise InvalidArgument(
                f"webhook header {name!r}: its value must be one line of at most"
                f" {MAX_HEADER_VALUE} printable ASCII characters"
            )


async def allowed(w: Webhook, allow: targets.Allowlist) -> None:
    await targets.check(w.url, allow)


def with_secret(w: Webhook, current: str = "") -> Webhook:
    """The webhook with a signing secret: its own, else ``current``, else a new one."""
    if w.secret:
        return w
    return dataclasses.replace(w, secret=current or signature.new_secret())
