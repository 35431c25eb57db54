"""``--etcd http://h1:2379,http://h2:2379``: the etcd endpoints a broker may use."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from dejaq.core.errors import InvalidArgument

DEFAULT_PORT = 2379


@dataclass(frozen=True)
class Endpoint:
    """One etcd member's client address (plain HTTP)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"http://{self.host}:{self.port}"


def parse_endpoints(text: str) -> list[Endpoint]:
    """Comma-separated ``http://HOST:PORT`` (or bare ``HOST:PORT``) endpoints."""
    endpoints = [_parse_one(item.strip()) for item in text.split(",") if item.strip()]
    if not endpoints:
        raise InvalidArgument("--etcd needs at least one endpoint, like http://127.0.0.1:2379")
    return endpoints


def _parse_one(item: str) -> Endpoint:
    url = urlsplit(item if "://" in item else f"http://{item}")
    if url.scheme != "http":
        raise InvalidArgument(f"etcd endpoint {item!r}: only http:// is supported")
    try:
        port = url.port or DEFAULT_PORT
    except ValueError as exc:
        raise InvalidArgument(f"etcd endpoint {item!r}: bad port") from exc
    if not url.hostname or url.path not in ("", "/"):
        raise InvalidArgument(f"etcd endpoint {item!r} is not http://HOST:PORT")
    return Endpoint(url.hostname, port)
