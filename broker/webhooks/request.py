"""A webhook's requests as bytes: the head its requests share made once, then
one ``bytes`` per message (head and body), written in one write.

Header names and values were checked when the webhook was set
(``broker/api/webhook_settings.py``): printable ASCII, one line, none of the
names the broker sets. A message's key and headers go as ``Dejaq-Key`` and
``Dejaq-Header-<name>`` (its W3C trace context as ``traceparent`` and
``tracestate``), their values percent-encoded unless plain (``header_value``).
"""

from __future__ import annotations

import re
from urllib.parse import quote

import msgspec
from yarl import URL

from dejaq.core import headers as message_headers
from dejaq.core.model import LeasedMessage, Webhook
from dejaq.core.signature import Signer

# Characters an id may carry as they are in a header value (RFC 3986's
# unreserved and sub-delims, ':', '@' and '/'); any other is percent-encoded.
_SAFE_ID = re.compile(r"[A-Za-z0-9\-._~:@/!$&'()*+,;=]*")


def header_id(mid: str) -> str:
    """A message id as a header value: percent-encoded UTF-8 (RFC 3986), so
    any id travels; ids of letters, digits and ``-._~:@/!$&'()*+,;=`` read as they are."""
    if _SAFE_ID.fullmatch(mid):
        return mid
    return quote(mid, safe="-._~:@/!$&'()*+,;=")


# A value sent as it is: printable ASCII without '%', no space at either end
# (a parser would strip it). Any other is percent-encoded, so unquote is exact.
_PLAIN_VALUE = re.compile(r"(?:[!-$&-~](?:[ !-$&-~]*[!-$&-~])?)?")
_VALUE_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if c != ord("%"))
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TRACE = ("traceparent", "tracestate")


def header_value(value: str) -> str:
    """A message's key or header value as a header value: as it is when it is
    printable ASCII without ``%`` and without a space at either end, else
    percent-encoded UTF-8 (RFC 3986), so ``urllib.parse.unquote`` is exact."""
    if _PLAIN_VALUE.fullmatch(value):
        return value
    return quote(value, safe=_VALUE_SAFE)


def message_lines(m: LeasedMessage, trace: bytes) -> bytes:
    """The header lines of ``m``'s key and headers (``b""`` when it has neither);
    its ``traceparent`` and ``tracestate`` only when ``trace`` (the trace lines
    the broker gives the request) is empty, so a request never carries two."""
    lines = [f"Dejaq-Key: {header_value(m.key)}\r\n"] if m.key else []
    if m.headers:
        try:
            headers = message_headers.decode(m.headers)
        except msgspec.MsgspecError:
            headers = {}  # checked at produce; stored bytes that do not decode send none
        for name, value in headers.items():
            if not _TOKEN.fullmatch(name):
                continue  # checked at produce too; never a broken line
            lowered = name.lower()
            if lowered in _TRACE:
                if not trace:
                    lines.append(f"{lowered}: {header_value(value)}\r\n")
            else:
                lines.append(f"Dejaq-Header-{name}: {header_value(value)}\r\n")
    return "".join(lines).encode("ascii")


def host_header(url: URL) -> str:
    host = url.raw_host or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return host if url.is_default_port() else f"{host}:{url.port}"


class RequestHead:
    """What every request of one webhook shares, and the per-message rest."""

    def __init__(self, hook: Webhook) -> None:
        url = URL(hook.url)
        headers = {"Content-Type": "application/octet-stream", **dict(hook.headers)}
        lines = [f"POST {url.raw_path_qs or '/'} HTTP/1.1", f"Host: {host_header(url)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self._prefix = ("\r\n".join(lines) + "\r\n").encode("ascii")
        self._signer = Signer(hook.secret)

    def request(self, m: LeasedMessage, t_ms: int, trace: bytes = b"") -> bytes:
        """The whole request for ``m``, signed at ``t_ms``; ``trace``: its
        ``traceparent`` (and ``tracestate``) header lines, if any."""
        body = m.payload
        return (
            b"%s%s%sDejaq-Id: %s\r\nDejaq-Timestamp-Ms: %d\r\nDejaq-Delivery: %d\r\n"
            b"Dejaq-Signature: t=%d,v1=%s\r\nContent-Length: %d\r\n\r\n%s"
            % (
                self._prefix,
                trace,
                message_lines(m, trace) if m.key or m.headers else b"",
                header_id(m.id).encode(),
                m.timestamp,
                m.deliveries,
                t_ms,
                self._signer.digest(t_ms, body).encode(),
                len(body),
                body,
            )
        )
