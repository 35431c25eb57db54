"""A webhook's requests as bytes: the head its requests share made once, then
one ``bytes`` per message (head and body), written in one write.

Header names and values were checked when the webhook was set
(``broker/api/webhook_settings.py``): printable ASCII, one line, none of the
names the broker sets.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from yarl import URL

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
            b"%s%sDejaq-Id: %s\r\nDejaq-Timestamp-Ms: %d\r\nDejaq-Delivery: %d\r\n"
            b"Dejaq-Signature: t=%d,v1=%s\r\nContent-Length: %d\r\n\r\n%s"
            % (
                self._prefix,
                trace,
                header_id(m.id).encode(),
                m.timestamp,
                m.deliveries,
                t_ms,
                self._signer.digest(t_ms, body).encode(),
                len(body),
                body,
            )
        )
