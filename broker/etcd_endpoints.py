"""``--etcd https://h1:2379,https://h2:2379``: the etcd endpoints a broker may use."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact

DEFAULT_PORT = 2379


@dataclass(frozen=True)
class Endpoint:
    """One etcd member's client address, over TLS (https://) or plain HTTP."""

    host: str
    port: int
    tls: bool = False

    def __str__(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"


def parse_endpoints(text: str) -> list[Endpoint]:
    """Comma-separated ``http(s)://HOST:PORT`` (or bare ``HOST:PORT``, plain HTTP)
    endpoints, all of one scheme."""
    endpoints = [_parse_one(item.strip()) for item in text.split(",") if item.strip()]
    if not endpoints:
        raise InvalidArgument("--etcd needs at least one endpoint, like http://127.0.0.1:2379")
    if len({e.tls for e in endpoints}) > 1:
        raise InvalidArgument(f"etcd endpoints {redact(text)!r} mix http:// and https://")
    return endpoints


def _parse_one(item: str) -> Endpoint:
    shown = redact(item)
    try:
        url = urlsplit(item if "://" in item else f"http://{item}")
    except ValueError as exc:  # an unclosed [IPv6] bracket
        raise InvalidArgument(f"etcd endpoint {shown!r}: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise InvalidArgument(f"etcd endpoint {shown!r}: expected http:// or https://")
    if url.username is not None or url.password is not None:
        raise InvalidArgument(
            f"etcd endpoint {shown!r}: give credentials with --etcd-user and"
            " --etcd-password-file, not in the URL"
        )
    try:
        port = url.port or DEFAULT_PORT
    except ValueError as exc:
        raise InvalidArgument(f"etcd endpoint {shown!r}: bad port") from exc
    if not url.hostname or url.path not in ("", "/"):
        raise InvalidArgument(f"etcd endpoint {shown!r} is not http(s)://HOST:PORT")
    return Endpoint(url.hostname, port, url.scheme == "https")
